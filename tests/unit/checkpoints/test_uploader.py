"""The thread that copies completed micro-batches to the store: when it takes a checkpoint, what a
failed one costs, and what a failed try drains (the store copy itself: test_store_copy.py)."""

import time

from airflow_ft_provider.checkpoints.config import CheckpointConfig
from airflow_ft_provider.checkpoints.fencing import Why, restore_decision
from airflow_ft_provider.checkpoints.local import LocalCheckpoint
from airflow_ft_provider.checkpoints.snapshot import CheckpointMetadata
from airflow_ft_provider.checkpoints.store_copy import Fence
from airflow_ft_provider.checkpoints.uploader import CheckpointUploader
from airflow_ft_provider.partitions import RunRef

FENCE = Fence({"raw": "a1"}, 100, 1)


class FakeCopy:
    """Records the checkpoints taken; fails while ``failing``."""

    task = "score"

    def __init__(self, failing=False):
        self.taken, self.failing, self.retained = [], failing, []

    def take(self, task_dir, checkpoint_id, fence, *, processed_bytes, compress, deadline):
        if self.failing:
            raise OSError("the endpoint is unreachable")
        self.taken.append(checkpoint_id)
        return CheckpointMetadata(
            checkpoint_id, 1, fence.inputs, 100, processed_bytes, "file:///x", (), 0, 1, 0
        )

    def retain(self, keep):
        self.retained.append(keep)


def commit(local, batch):
    (local.spark_dir / "commits").mkdir(parents=True, exist_ok=True)
    (local.spark_dir / "commits" / str(batch)).write_text("v1\n{}")


def wait_for(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert condition()


def test_each_committed_micro_batch_becomes_a_checkpoint_and_num_retained_bounds_them(tmp_path):
    local = LocalCheckpoint(tmp_path, RunRef("etl", "r"), "score")
    copy = FakeCopy()
    uploader = CheckpointUploader(copy, local, CheckpointConfig(num_retained=3), FENCE, taken=None,
                                  on_intolerable=lambda reason: None).start()  # fmt: skip
    commit(local, 0)
    wait_for(lambda: copy.taken == [0])
    commit(local, 1)
    wait_for(lambda: copy.taken == [0, 1])
    uploader.stop(drain=False)
    assert copy.retained == [3, 3] and uploader.stats.as_dict()["completed"] == 2


def test_min_pause_skips_micro_batches_and_a_failed_try_drains_the_last_one(tmp_path):
    local = LocalCheckpoint(tmp_path, RunRef("etl", "r"), "score")
    copy = FakeCopy()
    uploader = CheckpointUploader(copy, local, CheckpointConfig(min_pause=60.0), FENCE, taken=None,
                                  on_intolerable=lambda reason: None).start()  # fmt: skip
    commit(local, 0)
    wait_for(lambda: copy.taken == [0])
    commit(local, 1)
    commit(local, 2)
    time.sleep(0.5)
    assert copy.taken == [0]  # within the pause: no checkpoint
    uploader.stop(drain=True)  # the try failed: its last completed micro-batch is kept
    assert copy.taken == [0, 2]


def test_a_resumed_try_does_not_take_the_checkpoint_it_resumed_from_again(tmp_path):
    local = LocalCheckpoint(tmp_path, RunRef("etl", "r"), "score")
    commit(local, 4)
    copy = FakeCopy()
    CheckpointUploader(copy, local, CheckpointConfig(), FENCE, taken=4, on_intolerable=print).stop(drain=True)
    assert copy.taken == []


def test_more_failed_checkpoints_in_a_row_than_tolerable_fail_the_try(tmp_path):
    local = LocalCheckpoint(tmp_path, RunRef("etl", "r"), "score")
    copy, reasons = FakeCopy(failing=True), []
    uploader = CheckpointUploader(copy, local, CheckpointConfig(tolerable_failed=1), FENCE, taken=None,
                                  on_intolerable=reasons.append).start()  # fmt: skip
    commit(local, 0)
    wait_for(lambda: uploader.stats.failed == 1)
    time.sleep(0.5)
    assert reasons == []  # one failure is tolerated, and batch 0 is not retried until another commits
    commit(local, 1)
    wait_for(lambda: reasons)
    uploader.stop(drain=True)
    assert uploader.stats.failed == 2  # no drain after the try was failed
    assert (
        "2 checkpoints failed in a row, more than execution.checkpointing.tolerable-failed-checkpoints=1"
        in (reasons[0])
    )
    assert "OSError: the endpoint is unreachable" in reasons[0]


def test_an_unrestorable_checkpoint_is_a_fresh_start_that_says_why():
    from airflow_ft_provider.checkpoints.fencing import CompletedCheckpoint

    latest = CompletedCheckpoint(5, {"raw": "a1"}, 50, 100, 1)
    decision = restore_decision(latest, {"raw": "a1"}, pipelined_input=False, damage="out/x: missing")
    assert decision.why is Why.UNRESTORABLE and not decision.resume
    assert (
        decision.explain("score", 2)
        == "score try 2 starts fresh: checkpoint 5 cannot be restored (out/x: missing)"
    )
