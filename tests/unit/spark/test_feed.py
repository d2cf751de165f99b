"""The feeder of a checkpointed stage's stream: a probe file first, then chunks sized from the last
micro-batch's rate (bounded by interval-volume), the next chunk only once Spark planned the last one."""

import json

from airflow_ft_provider.spark.feed import FedFile, Feeder, batch_seconds


def staged(tmp_path, sizes):
    files = []
    for i, size in enumerate(sizes):
        path = tmp_path / "in" / f"part-{i}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
        files.append(FedFile(str(path), str(tmp_path / "feed" / f"part-{i}"), size))
    return files


def plan(tmp_path, batch, files):
    """What Spark writes when it plans a micro-batch: its files in sources/0/<batch>."""
    log = tmp_path / "spark" / "sources" / "0"
    log.mkdir(parents=True, exist_ok=True)
    lines = ["v1", *(json.dumps({"path": f"file://{f.fed}", "batchId": batch}) for f in files)]
    (log / str(batch)).write_text("\n".join(lines))


def test_chunks_follow_the_rate_of_the_last_micro_batch_and_wait_for_spark(tmp_path):
    files = staged(tmp_path, [100] * 10)
    feeder = Feeder(files, str(tmp_path / "spark"), volume=400, target=1.0)
    feeder.feed_if_planned(None)
    assert feeder.fed == {files[0].fed}  # the probe: one file
    feeder.feed_if_planned(None)
    assert len(feeder.fed) == 1  # Spark has not planned it yet
    plan(tmp_path, 0, files[:1])
    feeder.feed_if_planned(None)
    assert len(feeder.fed) == 1  # planned, but its rate is not known yet: no second probe
    feeder.observe({0: 0.4})  # 100 bytes in 0.4 s: 250 B/s, 0.8 s of it is 200 bytes
    feeder.feed_if_planned(0)
    assert len(feeder.fed) == 3
    plan(tmp_path, 1, files[1:3])
    feeder.observe({0: 0.4, 1: 0.01})  # fast now: the volume bounds the chunk
    feeder.feed_if_planned(0)
    assert len(feeder.fed) == 7
    assert (tmp_path / "feed" / "part-6").read_bytes() == b"x" * 100  # linked to the staged file


def test_finished_only_when_every_fed_file_is_in_a_committed_batch_and_a_resume_relinks(tmp_path):
    files = staged(tmp_path, [100, 100])
    feeder = Feeder(files, str(tmp_path / "spark"), volume=1000, target=1.0)
    plan(tmp_path, 0, files[:1])  # a failed try's planned batch: relinked for Spark to run it again
    assert feeder.resume() == 1 and (tmp_path / "feed" / "part-0").exists()
    feeder.observe({0: 0.1})
    feeder.feed_if_planned(None)
    assert not feeder.finished(0)  # part-1 is fed, not planned
    plan(tmp_path, 1, files[1:])
    assert not feeder.finished(0) and feeder.finished(1)


def test_a_probe_that_shows_no_rate_is_followed_by_another_once_committed(tmp_path):
    files = staged(tmp_path, [100] * 3)
    feeder = Feeder(files, str(tmp_path / "spark"), volume=400, target=1.0)
    feeder.feed_if_planned(None)
    plan(tmp_path, 0, files[:1])
    feeder.observe({})  # an empty file: Spark reports no rows, so no duration
    feeder.feed_if_planned(None)
    assert len(feeder.fed) == 1
    feeder.feed_if_planned(0)  # committed without a rate: probe again rather than wait forever
    assert len(feeder.fed) == 2


def test_a_resumed_feeder_sizes_its_first_chunk_from_the_restored_log_without_a_probe(tmp_path):
    files = staged(tmp_path, [100] * 10)
    plan(tmp_path, 0, files[:1])
    plan(tmp_path, 1, files[1:3])
    offsets = tmp_path / "spark" / "offsets"
    offsets.mkdir(parents=True)
    for batch, planned_at_ms in ((0, 1_000), (1, 1_100), (2, 2_100)):  # batch 1: 200 bytes in 1 s
        metadata = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": planned_at_ms})
        (offsets / str(batch)).write_text(f"v1\n{metadata}\n{{}}")
    (offsets / ".2.crc").write_text("not a batch")
    feeder = Feeder(files, str(tmp_path / "spark"), volume=1000, target=2.0)
    assert feeder.resume() == 3
    assert feeder.credit == 320  # 200 B/s for 0.8 of the 2 s interval
    feeder.feed_if_planned(None)
    assert len(feeder.fed) == 6  # three files of 100 bytes fit in 320: no probe


def test_batch_seconds_counts_micro_batches_that_read_input():
    class Progress:
        def __init__(self, batch, ms, rows):
            self.batchId, self.durationMs, self.numInputRows = batch, {"triggerExecution": ms}, rows

    assert batch_seconds([Progress(0, 1500, 10), Progress(1, 20, 0), None]) == {0: 1.5}


def test_the_failure_of_an_injected_micro_batch_is_the_injected_fault_not_sparks_read_error(tmp_path):
    from airflow_ft_provider.spark.failure_report import InjectedFailure

    poison = tmp_path / "feed" / "ft-injected-failure-3.parquet"
    poison.parent.mkdir()
    poison.write_bytes(b"not a Parquet file")
    feeder = Feeder([], str(tmp_path / "spark"), volume=400, target=1.0, poison=str(poison))
    spark_said = RuntimeError(f"[FAILED_READ_FILE.NO_HINT] Encountered error while reading file {poison}.")
    injected = feeder.injected(spark_said, 3)
    assert isinstance(injected, InjectedFailure) and "micro-batch 3 (ft_faults)" in str(injected)
    assert not poison.exists()  # a retry in this directory does not read it again
    # complete mode: the failure foreachBatch raised comes back wrapped by Spark
    wrapped = RuntimeError(
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] ... injected failure inside micro-batch 2 (ft_faults)"
    )
    assert isinstance(Feeder([], "s", volume=1, target=1.0).injected(wrapped, 2), InjectedFailure)
    assert feeder.injected(RuntimeError("[FAILED_READ_FILE.NO_HINT] other.parquet"), 3) is None
    assert feeder.injected(spark_said, None) is None  # no fault asked for: Spark's own error stands
