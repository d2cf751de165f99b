"""Checkpoint statistics of the executors' path from the store's listing of the micro-batches' outputs:
a try counts the micro-batches whose newest task marker is new or written again since it started."""

from __future__ import annotations

from airflow_ft_provider.checkpoints.stream_stats import StreamStats, committed_before, stored_batches
from airflow_ft_provider.partitions.s3_objects import ObjectInfo

PREFIX = "ckpt/run/squares/streams/g0123/"


def listing(*batches: tuple[int, int, float, str]) -> dict[str, ObjectInfo]:
    """(batch, bytes of its one object, its marker's time, the marker's ETag) -> a LIST's answer."""
    out = {"ckpt/run/squares/streams/gother/b000000/t001/_task-p00000-a0.json": ObjectInfo(9, 1.0, "x")}
    for batch, size, at, etag in batches:
        folder = f"{PREFIX}b{batch:06d}/t001/"
        out[f"{folder}part-00000-a0-0123456789ab.parquet"] = ObjectInfo(size, at - 0.5, "d")
        out[f"{folder}_task-p00000-a0.json"] = ObjectInfo(100, at, etag)
    out[f"{PREFIX}b000009/t001/part-00000-a0-0123456789ab.parquet"] = ObjectInfo(5, 50.0, "w")  # no marker
    return out


def test_a_resumed_try_counts_the_micro_batches_it_completed_or_ran_again():
    at_start = stored_batches(listing((0, 1000, 10.0, "r0"), (1, 1000, 12.0, "r1")), PREFIX)
    assert sorted(at_start) == [0, 1]  # another generation's and a batch without marker are not ones
    at_end = stored_batches(
        listing((0, 1000, 10.0, "r0"), (1, 2000, 20.0, "r1b"), (2, 3000, 23.5, "r2")), PREFIX
    )
    # 10 input objects of 100 B, 3 per micro-batch: micro-batch 2 has read objects 0-8
    stats = StreamStats.of_try(at_start, at_end, [100] * 10, 3, succeeded=True)

    assert [b.batch_id for b in stats.completed] == [1, 2]  # 1 ran again (new marker), 2 is new
    assert stats.as_dict() == {
        "processed_bytes": 900,
        "total_bytes": 1000,
        "completed": 2,
        "failed": 0,
        "failures": [],
        "last_completed": 2,
        "last_duration": 3.5,  # from micro-batch 1's marker to 2's
        "last_size": 3100,
        "last_incremental_size": 3100,
        "uploaded_bytes": 2100 + 3100,
    }
    sentence = stats.describe("squares", 2, succeeded=True)
    assert sentence.startswith("squares try 2 succeeded: 2 checkpoints completed, 0 failed")
    assert "micro-batch 2, covers 90 % of the input" in sentence


def test_a_try_that_completed_nothing_reports_nothing_to_time():
    before = stored_batches(listing((0, 1000, 10.0, "r0")), PREFIX)
    stats = StreamStats.of_try(before, before, [100] * 4, 1, succeeded=False)
    assert stats.completed == ()
    assert stats.as_dict()["completed"] == 0 and stats.as_dict()["last_duration"] is None
    assert (
        stats.describe("squares", 3, succeeded=False)
        == "squares try 3 failed: 0 checkpoints completed, 0 failed"
    )


def test_the_first_micro_batch_has_no_duration_and_covers_its_share():
    at_end = stored_batches(listing((0, 1000, 10.0, "r0")), PREFIX)
    stats = StreamStats.of_try({}, at_end, [100, 300], 1, succeeded=True)
    assert stats.as_dict()["last_duration"] is None
    assert (stats.processed_bytes, stats.total_bytes) == (100, 400)


def test_a_failed_try_s_newest_micro_batch_is_not_known_to_be_committed():
    #   micro-batches 0 and 1 written by an earlier try; this try wrote 2 and 3, then failed
    at_start = stored_batches(listing((0, 10, 1.0, "r0"), (1, 10, 2.0, "r1")), PREFIX)
    at_end = stored_batches(
        listing((0, 10, 1.0, "r0"), (1, 10, 2.0, "r1"), (2, 10, 3.0, "r2"), (3, 10, 4.0, "r3")), PREFIX
    )
    stats = StreamStats.of_try(at_start, at_end, [1] * 8, 2, succeeded=False)
    # Spark commits a micro-batch after all its tasks succeeded: 3 may have failed after some wrote
    assert [b.batch_id for b in stats.completed] == [2] and stats.processed_bytes == 6
    # and the next try's restore point is the newest micro-batch whose successor has a marker
    assert committed_before(at_end) == 2 and committed_before(at_start) == 0
    assert committed_before(stored_batches(listing((0, 10, 1.0, "r0")), PREFIX)) is None


def test_a_micro_batch_s_newest_marker_of_any_try_dates_it():
    at = {
        f"{PREFIX}b000000/t001/_task-p00000-a0.json": ObjectInfo(10, 5.0, "old"),
        f"{PREFIX}b000000/t002/_task-p00001-a0.json": ObjectInfo(10, 9.0, "new"),
        f"{PREFIX}b000000/t002/_task-p00000-a1.json": ObjectInfo(10, 7.0, "mid"),
        f"{PREFIX}b000000/t002/part-00001-a0-0123456789ab.parquet": ObjectInfo(70, 8.0, "d"),
    }
    [batch] = stored_batches(at, PREFIX).values()
    assert (batch.batch_id, batch.size, batch.recorded_at, batch.etag) == (0, 100, 9.0, "new")
