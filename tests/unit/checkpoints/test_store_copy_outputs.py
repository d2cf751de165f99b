"""A restore on another worker downloads Spark's checkpoint files only: the output of the micro-batches
the checkpoint covers stays in the store, noted in its batch directories, is carried into the retry's
own checkpoints without being uploaded again, is counted from the notes, and is committed by copies
inside S3 (moto server over HTTP; real Parquet files)."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_ft_provider.checkpoints.store_copy import StoreCheckpoints
from airflow_ft_provider.partitions import Producer
from airflow_ft_provider.spark.carried import CARRIED_NOTE, carried_rows
from tests.unit.checkpoints.spark_layout import FENCE, RUN, spark_dir

pytestmark = pytest.mark.s3
ROWS = 1000


def parquet_output(task_dir, batches):
    """Real Parquet output for micro-batches ``batches`` (ids batch*ROWS .. (batch+1)*ROWS - 1)."""
    for batch in batches:
        folder = task_dir / "out" / "squares" / f"b{batch:010d}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        pq.write_table(
            pa.table({"id": range(batch * ROWS, (batch + 1) * ROWS)}), folder / "part-00000.parquet"
        )


def requests(store):
    """The S3 operations the store's client makes from now on, by name."""
    made = []
    store.client.meta.events.register("before-call.s3.*", lambda model, **_: made.append(model.name))
    return made


def taken_on_worker_a(store, tmp_path):
    worker_a = tmp_path / "a" / "task"
    spark_dir(worker_a, 3)
    parquet_output(worker_a, range(3))
    return StoreCheckpoints(store, RUN, "squares").take(
        worker_a, 2, FENCE, processed_bytes=30, compress=False
    )


def test_a_restore_elsewhere_fetches_spark_files_only_and_the_commit_copies_the_rest(store, tmp_path):
    taken = taken_on_worker_a(store, tmp_path)
    outputs = [f for f in taken.files if f.path.startswith("out/")]
    assert [f.rows for f in outputs] == [ROWS] * 3  # counted from the footers when taken
    worker_b = tmp_path / "b" / "task"
    copy = StoreCheckpoints(store, RUN, "squares")
    made = requests(store)
    fetched = copy.restore(taken, worker_b)
    assert fetched == sum(f.size for f in taken.files if f.path.startswith("spark/"))
    assert made.count("GetObject") == len([f for f in taken.files if f.path.startswith("spark/")])
    location = worker_b / "out" / "squares"
    assert not list(location.rglob("*.parquet"))  # no output fetched: noted instead
    assert sorted(p.parent.name for p in location.rglob(CARRIED_NOTE)) == [f"b{b:010d}" for b in range(3)]
    assert carried_rows(location.as_uri()) == 3 * ROWS  # what the stage adds to its own count

    # The retry runs micro-batch 3 here; its checkpoint lists the noted files without uploading them.
    spark_dir(worker_b, 4)
    parquet_output(worker_b, [3])
    made.clear()
    retry = copy.take(worker_b, 3, FENCE, processed_bytes=40, compress=False)
    assert {f.path: f.sha256 for f in outputs}.items() <= {f.path: f.sha256 for f in retry.files}.items()
    uploaded = [
        f for f in retry.files if f.path.startswith("out/") and f.path not in {o.path for o in outputs}
    ]
    assert retry.uploaded_bytes < sum(f.size for f in outputs) and len(uploaded) == 1

    stored = copy.stored_outputs(retry, worker_b)
    assert len(stored) == 4  # three only in the store, one on this disk too
    ref = RUN.parse("squares")
    made.clear()
    manifest = store.commit(ref, location, producer=Producer("squares", 0, 2), copy_from=stored)
    assert made.count("CopyObject") == 4 and manifest.row_count is None
    read = store.fetch(ref, tmp_path / "read")  # every file checked against its manifest checksum
    ids = sorted(i for path in read.paths for i in pq.read_table(path).column("id").to_pylist())
    assert ids == list(range(4 * ROWS))  # each row once, none missing


def test_a_complete_mode_batch_that_drops_the_older_batches_drops_their_notes_too(store, tmp_path):
    taken = taken_on_worker_a(store, tmp_path)
    worker_b = tmp_path / "b" / "task"
    copy = StoreCheckpoints(store, RUN, "squares")
    copy.restore(taken, worker_b)
    spark_dir(worker_b, 4)
    parquet_output(worker_b, [3])
    for batch in range(3):  # as write_stream(output_mode="complete") does: batch 3 is the whole result
        shutil.rmtree(worker_b / "out" / "squares" / f"b{batch:010d}")
    retry = copy.take(worker_b, 3, FENCE, processed_bytes=40, compress=False)
    assert [f.path for f in retry.files if f.path.startswith("out/")] == [
        "out/squares/b0000000003/part-00000.parquet"
    ]
    assert list(copy.stored_outputs(retry, worker_b)) == [
        worker_b / "out" / "squares" / "b0000000003" / "part-00000.parquet"
    ]
    assert carried_rows((worker_b / "out" / "squares").as_uri()) == 0


def test_local_recovery_accepts_noted_files_and_refuses_a_note_the_checkpoint_lacks(store, tmp_path):
    taken = taken_on_worker_a(store, tmp_path)
    worker_b = tmp_path / "b" / "task"
    StoreCheckpoints(store, RUN, "squares").restore(taken, worker_b)
    copy = StoreCheckpoints(store, RUN, "squares")  # the next try on worker b
    made = requests(store)
    assert copy.verify_local(taken, worker_b) is None and "GetObject" not in made
    stray = worker_b / "out" / "squares" / "b0000000007"
    stray.mkdir()
    shutil.copy(worker_b / "out" / "squares" / "b0000000000" / CARRIED_NOTE, stray / CARRIED_NOTE)
    assert "b0000000007/part-00000.parquet is noted as in the store" in copy.verify_local(taken, worker_b)
    (stray / CARRIED_NOTE).write_text('{"files": [["../../escape", 1, "x", 1]]}')
    assert "damaged" in copy.verify_local(taken, worker_b)


def test_output_without_known_rows_is_fetched_as_before(store, tmp_path):
    worker_a = tmp_path / "a" / "task"
    spark_dir(worker_a, 2)  # its output files are not Parquet: no rows
    taken = StoreCheckpoints(store, RUN, "squares").take(
        worker_a, 1, FENCE, processed_bytes=0, compress=False
    )
    worker_b = tmp_path / "b" / "task"
    assert StoreCheckpoints(store, RUN, "squares").restore(taken, worker_b) == taken.size
    assert not list(worker_b.rglob(CARRIED_NOTE))
