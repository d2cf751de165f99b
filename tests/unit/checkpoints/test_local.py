"""The task-local checkpoint directory: what it says about its last checkpoint, and its clean-up."""

import json
import os

from airflow_ft_provider.checkpoints.local import LocalCheckpoint, sweep_stale
from airflow_ft_provider.partitions import RunRef

RUN = RunRef("etl", "manual__1")


def input_files(local, sizes):
    """Input files as the stream sees them (feed/<input>/<result>-<n>/<file>), their sizes known from
    the manifests: the files themselves need not exist (a resumed try does not fetch those it read)."""
    files = []
    for i, size in enumerate(sizes):
        files.append(local.path / "feed" / "raw" / "raw-0" / f"in-{i}.parquet")
        local.input_sizes[f"raw-0/in-{i}.parquet"] = size
    return files


def spark_checkpoint(local, commits, files_by_batch, inputs):
    """Spark's layout: commits/<batch id>, sources/0/<batch id> ("v1" then one JSON line per file)."""
    (local.spark_dir / "commits").mkdir(parents=True)
    (local.spark_dir / "sources" / "0").mkdir(parents=True)
    for batch in commits:
        (local.spark_dir / "commits" / str(batch)).write_text("v1\n{}")
    for batch, files in files_by_batch.items():
        lines = ["v1", *(json.dumps({"path": f"file:{f}", "timestamp": 0, "batchId": batch}) for f in files)]
        (local.spark_dir / "sources" / "0" / str(batch)).write_text("\n".join(lines))
    local.fence(inputs, total_bytes=300, try_number=1)


def test_the_last_completed_checkpoint_and_the_input_it_read(tmp_path):
    local = LocalCheckpoint(tmp_path, RUN, "score[2]")
    local.start_fresh()
    files = input_files(local, [100, 100, 100])
    # batches 0 and 1 completed; batch 2 was planned (its files logged) but never committed
    spark_checkpoint(local, [0, 1], {0: [files[0]], 1: [files[1]], 2: [files[2]]}, {"raw[2]": "a1"})
    latest = local.latest()
    assert (latest.checkpoint_id, latest.processed_bytes, latest.total_bytes) == (1, 200, 300)
    assert latest.inputs == {"raw[2]": "a1"} and latest.taken_by_try == 1


def test_no_commit_or_a_damaged_fence_is_no_checkpoint(tmp_path):
    local = LocalCheckpoint(tmp_path, RUN, "score")
    local.start_fresh()
    assert local.latest() is None
    spark_checkpoint(local, [0], {}, {})
    local.fence_file.write_text("{not json")
    assert local.latest() is None  # the try starts fresh rather than trust it


def test_checkpoints_unused_for_a_retention_are_swept_and_recent_ones_kept(tmp_path):
    old, recent = LocalCheckpoint(tmp_path, RUN, "a"), LocalCheckpoint(tmp_path, RunRef("etl", "r2"), "a")
    for local in (old, recent):
        local.start_fresh()
        local.fence({}, total_bytes=0, try_number=1)
    for path in (old.path, old.fence_file):
        os.utime(path, (1000.0, 1000.0))
    now = os.stat(recent.fence_file).st_mtime + 10
    assert sweep_stale(tmp_path, older_than=3600, now=now) == [old.path]
    assert not old.path.exists() and recent.path.exists()


def test_a_compacted_file_source_log_does_not_count_a_file_twice(tmp_path):
    local = LocalCheckpoint(tmp_path, RUN, "score")
    local.start_fresh()
    files = input_files(local, [100, 100, 100])
    spark_checkpoint(local, [0, 1, 2], {0: [files[0]], 1: [files[1]]}, {"raw": "a1"})
    # Spark compacts its file-source log every tenth batch: N.compact repeats every entry before it.
    entries = [json.dumps({"path": f"file:{f}", "timestamp": 0, "batchId": b}) for b, f in enumerate(files)]
    (local.spark_dir / "sources" / "0" / "2.compact").write_text("\n".join(["v1", *entries]))
    assert local.latest().processed_bytes == 300


def test_spark_s_temporary_log_files_are_not_read(tmp_path):
    local = LocalCheckpoint(tmp_path, RUN, "score")
    local.start_fresh()
    files = input_files(local, [100, 200])
    spark_checkpoint(local, [0], {0: [files[0]]}, {"raw": "a1"})
    # Spark writes .<batch>.<uuid>.tmp and renames it: a reader may list it and find it gone, or half-written.
    entry = json.dumps({"path": f"file:{files[1]}", "batchId": 0})
    (local.spark_dir / "sources" / "0" / ".1.abc.tmp").write_text(f"v1\n{entry}")
    assert local.latest().processed_bytes == 100


def test_a_released_checkpoint_leaves_no_empty_directory_but_keeps_its_neighbours(tmp_path):
    #   <root>/etl/r1/{a,b}  <root>/etl/r2/a
    first, second = LocalCheckpoint(tmp_path, RUN, "a"), LocalCheckpoint(tmp_path, RUN, "b")
    other_run = LocalCheckpoint(tmp_path, RunRef("etl", "r2"), "a")
    for local in (first, second, other_run):
        local.start_fresh()
    first.release()
    assert not first.path.exists() and second.path.is_dir()  # the run's directory holds b still
    second.release()
    assert not second.path.parent.exists() and other_run.path.is_dir()  # r1 gone, the pipeline's kept
    other_run.release()
    assert list(tmp_path.iterdir()) == []  # nothing left under the root, the root itself stays
