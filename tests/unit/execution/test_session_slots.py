"""The slots of warm Spark Connect sessions (execution/session_slots.py): one try per slot at a time,
a session handed on only after a clean end, another code or a lost state never sharing one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from airflow_ft_provider.execution.session_slots import SessionSlots, code_digest

SERVER = "sc://spark.example:15002"


def test_a_clean_end_hands_the_session_on_and_any_other_end_does_not(tmp_path):
    slots = SessionSlots(SERVER, "digest", root=tmp_path)
    first = slots.acquire()
    assert first is not None and first.index == 0
    slots.release(first, clean=True)
    again = slots.acquire()
    assert again is not None and again.session_id == first.session_id  # warm: the same session
    slots.release(again, clean=False)  # an error, a kill: the session may hold work still running
    after = slots.acquire()
    assert after is not None and after.index == 0 and after.session_id != first.session_id
    slots.release(after, clean=True)


def test_tries_at_once_take_slots_of_their_own(tmp_path):
    slots = SessionSlots(SERVER, "digest", root=tmp_path)
    one, two = slots.acquire(), slots.acquire()
    assert one is not None and two is not None
    assert (one.index, two.index) == (0, 1) and one.session_id != two.session_id
    slots.release(one, clean=True)
    slots.release(two, clean=True)


def test_other_code_or_another_server_gets_another_session(tmp_path):
    mine = SessionSlots(SERVER, "digest", root=tmp_path)
    lease = mine.acquire()
    assert lease is not None
    mine.release(lease, clean=True)
    for other in (
        SessionSlots(SERVER, "changed", root=tmp_path),
        SessionSlots("sc://other:1", "digest", root=tmp_path),
    ):
        theirs = other.acquire()
        assert theirs is not None and theirs.session_id != lease.session_id
        other.release(theirs, clean=True)


def test_the_digest_follows_the_files_contents(tmp_path):
    module = tmp_path / "udfs.py"
    module.write_text("def f(x): return x\n")
    before = code_digest([module])
    assert code_digest([module]) == before
    module.write_text("def f(x): return x + 1\n")
    assert code_digest([module]) != before


def test_a_closed_session_is_replaced_and_a_lost_state_file_starts_a_generation_no_one_used(tmp_path):
    slots = SessionSlots(SERVER, "digest", root=tmp_path)
    lease = slots.acquire()
    assert lease is not None
    closed = lease.session_id
    slots.retire(lease)  # the server answered SESSION_CLOSED
    assert lease.session_id != closed
    slots.release(lease, clean=True)
    lease.state_file.write_text("{not json")  # a cleaned or damaged temp dir
    fresh = slots.acquire()
    assert fresh is not None and fresh.session_id not in {closed, lease.session_id}
    slots.release(fresh, clean=True)
    assert json.loads(fresh.state_file.read_text()) == {"generation": fresh.generation, "clean": True}


HOLDER = """
import sys, time
from pathlib import Path
from airflow_ft_provider.execution.session_slots import SessionSlots
lease = SessionSlots(sys.argv[1], "digest", root=Path(sys.argv[2])).acquire()
print(lease.index, lease.session_id, flush=True)
time.sleep(600)
"""


def test_a_slot_is_held_by_its_process_until_that_process_ends_however_it_ends(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER), SERVER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        index, held = holder.stdout.readline().split()
        slots = SessionSlots(SERVER, "digest", root=tmp_path)
        beside = slots.acquire()
        assert beside is not None and (beside.index, int(index)) == (1, 0)  # slot 0 is taken
        slots.release(beside, clean=True)
    finally:
        holder.kill()  # SIGKILL: no clean end
        holder.wait()
    taken = slots.acquire()
    assert taken is not None and taken.index == 0  # the lock went with the process ...
    assert taken.session_id != held  # ... and its session, which may hold its work, is not shared
    slots.release(taken, clean=True)


def test_the_shipped_runtime_zip_has_the_same_bytes_for_the_same_modules(tmp_path):
    # a warm session accepts an artifact again only unchanged (ARTIFACT_ALREADY_EXISTS otherwise)
    import time
    from pathlib import Path

    from airflow_ft_provider.execution.submit import runtime_zip

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = Path(runtime_zip(tmp_path / "a")).read_bytes()
    time.sleep(2.1)  # zip timestamps have a 2-second resolution
    assert Path(runtime_zip(tmp_path / "b")).read_bytes() == first
