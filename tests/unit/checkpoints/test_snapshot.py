"""Append-mode output is Spark's file sink: its ``_spark_metadata`` log, not the directory, says which files
each micro-batch committed. A checkpoint takes the logged files of its batches (and the log up to them);
a batch that failed midway leaves files that are never part of a checkpoint nor of the output."""

import json

from airflow_ft_provider.checkpoints.snapshot import files_of_checkpoint, relocate_source_logs
from airflow_ft_provider.spark.sink_log import committed_names, remove_uncommitted


def sink_output(task_dir, batches, *, compact_at=None, failed_batch=None, taken_in=None):
    """out/squares as Spark's file sink leaves it: one data file per batch, logged in _spark_metadata
    (``compact_at``: that batch's log is a .compact repeating the earlier entries, as every tenth is)."""
    out = task_dir / "out" / "squares"
    log = out / "_spark_metadata"
    log.mkdir(parents=True)
    where = (taken_in or task_dir).as_uri()
    entries = []
    for batch in range(batches):
        (out / f"part-00000-b{batch}.c000.snappy.parquet").write_bytes(b"rows of batch %d" % batch)
        path = f"{where}/out/squares/part-00000-b{batch}.c000.snappy.parquet"
        entries.append(json.dumps({"path": path, "size": 16, "isDir": False, "action": "add"}))
        name = f"{batch}.compact" if batch == compact_at else str(batch)
        (log / name).write_text("\n".join(["v1", *(entries if batch == compact_at else entries[-1:])]))
    if failed_batch is not None:  # written by a task of a batch that failed, never logged
        (out / f"part-00001-b{failed_batch}.c000.snappy.parquet").write_bytes(b"half a batch")
        (out / f".part-00001-b{failed_batch}.c000.snappy.parquet.crc").write_bytes(b"crc")
    return out


def test_a_checkpoint_takes_the_logged_files_of_its_batches_only(tmp_path):
    out = sink_output(tmp_path, 4, compact_at=2, failed_batch=4)
    taken = {p.relative_to(out).as_posix() for p in files_of_checkpoint(tmp_path, 2)}
    assert taken == {
        "_spark_metadata/0",
        "_spark_metadata/1",
        "_spark_metadata/2.compact",
        "part-00000-b0.c000.snappy.parquet",
        "part-00000-b1.c000.snappy.parquet",
        "part-00000-b2.c000.snappy.parquet",
    }  # not batch 3's (after the checkpoint), nor the failed batch's file


def test_the_files_no_log_names_are_removed_before_the_output_is_counted(tmp_path):
    out = sink_output(tmp_path, 3, failed_batch=3)
    assert committed_names(out) == {f"part-00000-b{b}.c000.snappy.parquet" for b in range(3)}
    assert remove_uncommitted(out) == ["part-00001-b3.c000.snappy.parquet"]
    assert sorted(p.name for p in out.iterdir()) == [
        "_spark_metadata",
        *(f"part-00000-b{b}.c000.snappy.parquet" for b in range(3)),
    ]


def test_a_restored_sink_log_names_this_workers_files(tmp_path):
    worker_a, worker_b = tmp_path / "a", tmp_path / "b"
    out = sink_output(worker_b, 2, taken_in=worker_a)  # restored from a checkpoint taken on worker a
    assert relocate_source_logs(worker_b, worker_a.as_uri()) == 2
    assert worker_a.as_uri() + "/" not in (out / "_spark_metadata" / "1").read_text()
    assert worker_b.as_uri() + "/out/squares/part-00000-b1" in (out / "_spark_metadata" / "1").read_text()
