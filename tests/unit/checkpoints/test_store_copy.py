"""The primary copy of a task's checkpoints in the store (moto server over HTTP): a checkpoint is
visible only once complete, restores byte for byte elsewhere, uploads only what the store lacks, keeps
``num-retained``, and refuses damaged objects and hostile ``_metadata``.

The task-local directories here have Spark's layout (offsets, commits, file-source log, state, and
the output of each micro-batch); ``tests/unit/stage_try/test_checkpointed.py`` runs the real thing.
"""

from __future__ import annotations

import gzip
import json
import os
import select
import signal
import subprocess
import sys

import pytest

from airflow_ft_provider.checkpoints.snapshot import (
    CheckpointMetadata,
    InvalidCheckpoint,
    relocate_source_logs,
)
from airflow_ft_provider.checkpoints.store_copy import CheckpointTimeout, StoreCheckpoints
from ft_harness.services.s3_server import REPO_ROOT
from tests.unit.checkpoints.spark_layout import FENCE, RUN, files, spark_dir

pytestmark = pytest.mark.s3


def test_a_checkpoint_restores_on_another_worker_exactly_as_it_was_taken(store, tmp_path):
    worker_a, worker_b = tmp_path / "a" / "task", tmp_path / "b" / "task"
    spark_dir(worker_a, 3)
    taken = StoreCheckpoints(store, RUN, "score").take(worker_a, 2, FENCE, processed_bytes=30, compress=False)
    restored = StoreCheckpoints(store, RUN, "score")
    [metadata] = restored.candidates()
    assert (metadata.checkpoint_id, metadata.inputs, metadata.processed_bytes) == (2, {"raw": "a1"}, 30)
    assert restored.restore(metadata, worker_b) == taken.size
    expected = {
        k: v for k, v in files(worker_a).items() if not k.endswith(("offsets/3", "sources/0/3", "4.delta"))
    }
    assert files(worker_b) == expected  # batch 3 (in flight) is not part of checkpoint 2
    # Spark's file-source log names the files by path: made this worker's, or every file is read again.
    assert relocate_source_logs(worker_b, metadata.local_path) == 3
    assert worker_b.as_uri() in (worker_b / "spark" / "sources" / "0" / "2").read_text()
    assert worker_a.as_uri() + "/" not in (worker_b / "spark" / "sources" / "0" / "2").read_text()


def test_later_checkpoints_upload_only_what_the_store_lacks(store, tmp_path, s3_bucket):
    task_dir = tmp_path / "task"
    spark_dir(task_dir, 2)
    copy = StoreCheckpoints(store, RUN, "score")
    first = copy.take(task_dir, 1, FENCE, processed_bytes=20, compress=False)
    spark_dir(task_dir, 4)  # two more batches; the files of batches 0-1 are unchanged
    second = copy.take(task_dir, 3, FENCE, processed_bytes=40, compress=False)
    distinct = {f.sha256: f.size for f in first.files}  # identical files are one object
    assert first.uploaded_bytes == sum(distinct.values())
    new = {f.sha256: f.size for f in second.files if f.sha256 not in distinct}
    assert second.uploaded_bytes == sum(new.values()) < second.size  # batches 0-1 are not uploaded again
    assert second.uploaded_bytes >= 2 * 2000  # the output of batches 2 and 3 is
    objects = [k for k in s3_bucket.keys("store/") if "/objects/" in k]
    assert len(objects) == len({f.sha256 for f in second.files})


def test_a_worker_killed_during_the_upload_leaves_the_previous_checkpoint_the_latest(
    store, tmp_path, s3_bucket
):
    task_dir = tmp_path / "task"
    spark_dir(task_dir, 2)
    StoreCheckpoints(store, RUN, "score").take(task_dir, 1, FENCE, processed_bytes=20, compress=False)
    spark_dir(task_dir, 4)
    env = dict(os.environ, **s3_bucket.endpoint.env(), FT_TEST_PAUSE_AT="objects_uploaded")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    child = subprocess.Popen(
        [sys.executable, "-m", "ft_harness.runners.checkpoint_child", store.layout.url, RUN.pipeline,
         RUN.run_id, "score", str(task_dir), "3"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO_ROOT),
    )  # fmt: skip
    try:
        ready, _, _ = select.select([child.stdout], [], [], 120)
        line = child.stdout.readline().strip() if ready else ""
        assert line == "PAUSED objects_uploaded", child.stderr.read() if child.poll() is not None else line
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    copy = StoreCheckpoints(store, RUN, "score")
    assert copy.completed_ids() == [1]  # checkpoint 3's objects are there, its _metadata is not
    [latest] = copy.candidates()
    copy.restore(latest, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere" / "spark" / "commits" / "2").exists()
    # The next checkpoint completes, and keeping one drops what no kept checkpoint lists.
    copy.take(task_dir, 3, FENCE, processed_bytes=40, compress=False)
    assert copy.retain(1) >= 0 and copy.completed_ids() == [3]
    listed = {f.sha256 for f in copy.metadata(3).files}
    assert {k.rsplit("/", 1)[1] for k in s3_bucket.keys("store/") if "/objects/" in k} == listed


def test_num_retained_keeps_the_newest_checkpoints_and_the_objects_they_list(store, tmp_path, s3_bucket):
    task_dir = tmp_path / "task"
    copy = StoreCheckpoints(store, RUN, "score")
    for batches in (1, 2, 3):
        spark_dir(task_dir, batches)
        (task_dir / "spark" / "state" / "0" / "0" / "snapshot").write_bytes(os.urandom(99))  # rewritten
        copy.take(task_dir, batches - 1, FENCE, processed_bytes=batches, compress=False)
        copy.retain(2)
    assert copy.completed_ids() == [2, 1]
    kept = {f.sha256 for i in (1, 2) for f in copy.metadata(i).files}
    assert {k.rsplit("/", 1)[1] for k in s3_bucket.keys("store/") if "/objects/" in k} == kept
    copy.restore(copy.metadata(1), tmp_path / "older")  # the older kept one is whole
    assert copy.release() > 0 and not s3_bucket.keys("store/etl/")


def test_snapshot_compression_stores_spark_files_gzipped_and_restores_them(store, tmp_path, s3_bucket):
    task_dir = tmp_path / "task"
    spark_dir(task_dir, 2)
    (task_dir / "spark" / "offsets" / "1").write_text("v1\n" + "x" * 10_000)
    copy = StoreCheckpoints(store, RUN, "score")
    metadata = copy.take(task_dir, 1, FENCE, processed_bytes=0, compress=True)
    offsets = next(f for f in metadata.files if f.path == "spark/offsets/1")
    out = next(f for f in metadata.files if f.path.startswith("out/"))
    assert offsets.compressed and not out.compressed  # Parquet is compressed already
    key = next(k for k in s3_bucket.keys("store/") if k.endswith(offsets.sha256 + ".gz"))
    body = s3_bucket.client().get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
    assert len(body) < 200 and gzip.decompress(body) == ("v1\n" + "x" * 10_000).encode()
    copy.restore(metadata, tmp_path / "b")
    assert (tmp_path / "b" / "spark" / "offsets" / "1").read_text() == "v1\n" + "x" * 10_000


def test_a_damaged_or_missing_object_is_refused_and_nothing_half_restored_is_kept(store, tmp_path, s3_bucket):
    task_dir = tmp_path / "task"
    spark_dir(task_dir, 2)
    copy = StoreCheckpoints(store, RUN, "score")
    metadata = copy.take(task_dir, 1, FENCE, processed_bytes=0, compress=False)
    victim = next(f for f in metadata.files if f.path.startswith("out/"))
    key = next(k for k in s3_bucket.keys("store/") if k.endswith(victim.sha256))
    s3_bucket.client().put_object(Bucket=s3_bucket.name, Key=key, Body=b"not the file")
    with pytest.raises(InvalidCheckpoint, match="does not match its SHA-256"):
        copy.restore(metadata, tmp_path / "b")
    assert not (tmp_path / "b" / victim.path).exists()
    s3_bucket.client().delete_object(Bucket=s3_bucket.name, Key=key)
    with pytest.raises(InvalidCheckpoint, match="missing from the store"):
        copy.restore(metadata, tmp_path / "c")


def test_a_checkpoint_past_its_timeout_is_not_completed(store, tmp_path):
    task_dir = tmp_path / "task"
    spark_dir(task_dir, 2)
    copy = StoreCheckpoints(store, RUN, "score")
    with pytest.raises(CheckpointTimeout):
        copy.take(task_dir, 1, FENCE, processed_bytes=0, compress=False, deadline=0.0)
    assert copy.completed_ids() == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda doc: doc["files"].append(["../../../etc/passwd", 1, "0" * 64, False]), "not allowed"),
        (lambda doc: doc["files"].append(["in/raw.parquet", 1, "0" * 64, False]), "not under spark/ or out/"),
        (lambda doc: doc["files"].append(["spark/x", 1, "../objects", False]), "SHA-256"),
        (lambda doc: doc.update(checkpoint_id=7), "names checkpoint 7"),
        (lambda doc: doc.update(local_path="s3://elsewhere/"), "file:// URI"),
        (lambda doc: doc.update(processed_bytes=-1), "not a count"),
        (lambda doc: doc.update(version=9), "unknown version"),
        (
            lambda doc: doc["files"].append(["out/r/b0000000000/p", 1, "0" * 64, False, -3]),
            "rows is not a count",
        ),
    ],
    ids=[
        "escaping-path",
        "input-file",
        "object-name",
        "other-id",
        "local-path",
        "negative",
        "version",
        "rows",
    ],
)
def test_hostile_metadata_is_refused_and_the_try_looks_further(store, tmp_path, s3_bucket, change, message):
    task_dir = tmp_path / "task"
    spark_dir(task_dir, 2)
    copy = StoreCheckpoints(store, RUN, "score")
    copy.take(task_dir, 0, FENCE, processed_bytes=0, compress=False)
    good = copy.take(task_dir, 1, FENCE, processed_bytes=0, compress=False)
    doc = json.loads(good.to_json())
    change(doc)
    with pytest.raises(InvalidCheckpoint, match=message):
        CheckpointMetadata.from_json(json.dumps(doc).encode(), expected_id=1)
    key = next(k for k in s3_bucket.keys("store/") if k.endswith("chk-0000000001/_metadata"))
    s3_bucket.client().put_object(Bucket=s3_bucket.name, Key=key, Body=json.dumps(doc).encode())
    assert [m.checkpoint_id for m in copy.candidates()] == [0]  # passed over, not trusted


def test_a_file_spark_removes_while_the_checkpoint_is_taken_is_left_out(store, tmp_path, monkeypatch):
    from airflow_ft_provider.checkpoints import store_copy

    task_dir = tmp_path / "task"
    spark_dir(task_dir, 2)
    listed = store_copy.files_of_checkpoint
    # Spark deletes old log files and state versions as it goes: listed, then gone before it is read.
    monkeypatch.setattr(
        store_copy, "files_of_checkpoint", lambda d, k: [*listed(d, k), d / "spark" / "offsets" / "0.old"]
    )
    metadata = StoreCheckpoints(store, RUN, "score").take(
        task_dir, 1, FENCE, processed_bytes=0, compress=False
    )
    assert "spark/offsets/0.old" not in {f.path for f in metadata.files} and metadata.files
