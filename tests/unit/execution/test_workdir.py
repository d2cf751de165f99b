"""A try's scratch directory: removed when the try ends, and by the next try when the process was killed.

Each "try" that must outlive the test's process is a real Python process holding a TryWorkdir; the
test kills it with SIGKILL, as the OOM killer would, so nothing of it runs after the signal.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_ft_provider.execution.workdir import (
    ADOPTION_GRACE_SECONDS,
    OWNER_FILE,
    PREFIX,
    UNOWNED_GRACE_SECONDS,
    TryWorkdir,
    adopt_abandoned,
    keep_for_next_try,
    remove_abandoned,
)

HOLDER = """
import sys, time
from airflow_ft_provider.execution.workdir import TryWorkdir
with TryWorkdir(sys.argv[1]) as path:
    (path / "out").mkdir()
    (path / "out" / "part-0.parquet").write_bytes(b"x" * 1024)
    print(path, flush=True)
    time.sleep(600)
"""


class Holder:
    """A try in another process, inside its TryWorkdir until killed."""

    def __init__(self, base: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(base)], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.path = Path(self.process.stdout.readline().strip())
        assert self.path.is_dir(), "the holder did not start"

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)


@pytest.fixture
def holders():
    started: list[Holder] = []

    def start(base: Path) -> Holder:
        started.append(Holder(base))
        return started[-1]

    yield start
    for holder in started:
        if holder.process.poll() is None:
            holder.kill()


def test_a_try_that_ends_or_fails_removes_its_directory(tmp_path):
    with TryWorkdir(tmp_path) as path:
        (path / "staged.parquet").write_bytes(b"data")
        assert path.parent == tmp_path and path.name.startswith(PREFIX)
        assert (path / OWNER_FILE).is_file()
    assert not path.exists()
    with pytest.raises(RuntimeError), TryWorkdir(tmp_path) as failing:
        raise RuntimeError("the Spark application failed")
    assert not failing.exists()
    assert list(tmp_path.iterdir()) == []


def test_the_next_try_removes_what_a_killed_try_left_and_keeps_a_running_try(tmp_path, holders):
    #   killed try ──SIGKILL──▶ its directory stays behind
    #   running try (alive)      its directory is in use
    #   next try                 removes the first, keeps the second
    killed, running = holders(tmp_path), holders(tmp_path)
    killed.kill()
    assert (killed.path / "out" / "part-0.parquet").is_file()  # nothing of it ran after the signal

    workdir = TryWorkdir(tmp_path)
    with workdir as path:
        assert not killed.path.exists()
        assert (running.path / "out" / "part-0.parquet").is_file()
        assert sorted(tmp_path.iterdir()) == sorted([path, running.path])
    assert workdir.removed == [killed.path]


def test_removal_is_logged_for_the_try(tmp_path, holders, caplog):
    killed = holders(tmp_path)
    killed.kill()
    log = logging.getLogger("ft.test.workdir")
    with caplog.at_level(logging.INFO, logger=log.name), TryWorkdir(tmp_path, log=log) as path:
        pass
    assert f"removed 1 scratch directories of killed tries: {killed.path}" in caplog.text
    assert f"scratch directory of this try: {path}" in caplog.text


def test_a_directory_without_owner_is_kept_while_it_may_be_being_set_up(tmp_path):
    # made by a release before the owner lock, or by a try between mkdtemp and its lock
    unowned = tmp_path / f"{PREFIX}older-release"
    (unowned / "out").mkdir(parents=True)
    now = unowned.stat().st_mtime
    assert remove_abandoned(tmp_path, now=now + UNOWNED_GRACE_SECONDS - 1) == []
    assert unowned.is_dir()
    assert remove_abandoned(tmp_path, now=now + UNOWNED_GRACE_SECONDS + 1) == [unowned]
    assert not unowned.exists()


def test_nothing_but_this_users_own_scratch_directories_is_touched(tmp_path):
    # /tmp is shared: a link named like a scratch directory, a file, and other names stay as they are
    outside = tmp_path / "outside"
    (outside / "precious").mkdir(parents=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / f"{PREFIX}link").symlink_to(outside, target_is_directory=True)
    (scratch / f"{PREFIX}file").write_text("not a directory")
    (scratch / "other-dir").mkdir()
    owner_link = scratch / f"{PREFIX}owner-link"
    owner_link.mkdir()
    (owner_link / OWNER_FILE).symlink_to(outside / "precious")
    far_future = os.stat(scratch).st_mtime + 10 * UNOWNED_GRACE_SECONDS

    assert remove_abandoned(scratch, now=far_future) == []
    assert (outside / "precious").is_dir()
    assert sorted(p.name for p in scratch.iterdir()) == sorted(
        [f"{PREFIX}link", f"{PREFIX}file", "other-dir", f"{PREFIX}owner-link"]
    )


def test_a_killed_trys_directory_is_adopted_then_removed_and_a_live_trys_never(tmp_path, holders):
    #   killed try ──SIGKILL──▶ its finished output is adopted by the next try, which removes it after
    #   running try (alive)      never adopted: it commits its own output
    killed, running = holders(tmp_path), holders(tmp_path)
    killed.kill()
    with adopt_abandoned(killed.path) as claimed:
        assert claimed
        assert (killed.path / "out" / "part-0.parquet").is_file()
        assert remove_abandoned(tmp_path) == []  # a sweeper meanwhile leaves it alone
    assert not killed.path.exists()
    with adopt_abandoned(running.path) as claimed:
        assert not claimed
    assert (running.path / "out" / "part-0.parquet").is_file()
    with adopt_abandoned(tmp_path / "gone") as claimed:
        assert not claimed


def test_a_killed_try_with_finished_output_is_kept_for_adoption_until_the_grace_ends(tmp_path, holders):
    killed = holders(tmp_path)
    keep_for_next_try(killed.path)
    killed.kill()
    assert remove_abandoned(tmp_path) == [] and killed.path.is_dir()  # its next try may adopt it
    later = time.time() + ADOPTION_GRACE_SECONDS + 1
    assert remove_abandoned(tmp_path, now=later) == [killed.path]
