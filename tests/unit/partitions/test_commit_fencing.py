"""Fencing of zombie producers: an older try never replaces what a newer try committed."""

from __future__ import annotations

import threading

import pytest

from airflow_ft_provider.partitions import PartitionRef, Producer, StaleCommitError
from ft_harness.data.partition_files import read_all, version_files, write_files

pytestmark = pytest.mark.s3


def source(tmp_path, version):
    return write_files(tmp_path / f"src-v{version}", version_files(version))


def test_zombie_commit_after_a_newer_try_is_rejected(store, ref, tmp_path, s3_bucket):
    #   try 2 commits  ...  try 1 (zombie, e.g. lost heartbeat) commits later -> rejected
    store.commit(ref, source(tmp_path, 2), producer=Producer("p", 0, 2))
    with pytest.raises(StaleCommitError) as excinfo:
        store.commit(ref, source(tmp_path, 1), producer=Producer("p", 0, 1))
    assert (excinfo.value.try_number, excinfo.value.committed_try) == (1, 2)
    assert "try 2" in str(excinfo.value) and "orders[0]" in str(excinfo.value)
    assert store.manifest(ref).producer.try_number == 2
    assert read_all(store.fetch(ref, tmp_path / "in").paths) == version_files(2)
    # The rejected attempt cleaned up after itself: only try 2's attempt is stored.
    attempts = {k.split("/attempts/")[1].split("/")[0] for k in s3_bucket.keys() if "/attempts/" in k}
    assert attempts == {store.manifest(ref).attempt_id}


def test_same_or_newer_try_replaces(store, ref, tmp_path):
    store.commit(ref, source(tmp_path, 1), producer=Producer("p", 0, 1))
    again = store.commit(ref, source(tmp_path, 5), producer=Producer("p", 0, 1))  # same try, retried commit
    assert store.manifest(ref).attempt_id == again.attempt_id
    store.commit(ref, source(tmp_path, 3), producer=Producer("p", 0, 3))
    assert read_all(store.fetch(ref, tmp_path / "in").paths) == version_files(3)


@pytest.mark.parametrize("existing", [False, True], ids=["first-commit", "replace"])
@pytest.mark.parametrize("race_winner", [1, 2], ids=["old-try-wins-race", "new-try-wins-race"])
def test_two_concurrent_committers_end_with_the_newer_try(make_store, tmp_path, existing, race_winner):
    #   try 1 ──read manifest──┐            ┌── PUT (conditional) ──> ok / 412 -> re-read -> decide
    #                          ├─ barrier ──┤
    #   try 2 ──read manifest──┘            └── PUT (conditional) ──> ok / 412 -> re-read -> decide
    # Both read the same state before either writes; the race winner writes first. Whoever wins,
    # the newer try's data is what readers get, and the older try learns it was fenced.
    ref = PartitionRef("etl", "manual__2026-11-22T04:00:00+00:00", "orders", 0)
    if existing:
        make_store().commit(ref, source(tmp_path, 0), producer=Producer("p", 0, 0))
    both_read = threading.Barrier(2, timeout=60)
    winner_done = threading.Event()
    outcome: dict[int, object] = {}

    def committer(try_number):
        def on_step(step, info):
            if step == "before_manifest_put" and info["round"] == 1:
                both_read.wait()
                if try_number != race_winner:
                    assert winner_done.wait(60)

        store = make_store(on_step=on_step)
        try:
            outcome[try_number] = store.commit(
                ref, source(tmp_path, try_number), producer=Producer("p", 0, try_number)
            )
        except StaleCommitError as exc:
            outcome[try_number] = exc
        finally:
            if try_number == race_winner:
                winner_done.set()

    threads = [threading.Thread(target=committer, args=(t,)) for t in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    store = make_store()
    assert store.manifest(ref).producer.try_number == 2
    assert store.manifest(ref).attempt_id == outcome[2].attempt_id
    assert read_all(store.fetch(ref, tmp_path / "in").paths) == version_files(2)
    if race_winner == 1:
        assert not isinstance(outcome[1], Exception)  # it committed, then try 2 replaced it
    else:
        assert isinstance(outcome[1], StaleCommitError)
