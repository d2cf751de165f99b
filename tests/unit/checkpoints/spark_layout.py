"""Task-local checkpoint directories with Spark's layout (offsets, commits, file-source log, state, and the
output of each micro-batch), for the tests of the store's copy; ``tests/unit/stage_try`` runs the real
thing."""

from __future__ import annotations

import json
import os

from airflow_ft_provider.checkpoints.store_copy import Fence
from airflow_ft_provider.partitions import RunRef

RUN = RunRef("etl", "manual__2026-11-25T09:00:00+00:00")
FENCE = Fence({"raw": "a1"}, 100, 1)


def spark_dir(task_dir, batches, *, in_flight=True):
    """Batches 0..batches-1 committed, with their output; batch ``batches`` planned but not committed."""
    spark = task_dir / "spark"
    (spark / "metadata").parent.mkdir(parents=True, exist_ok=True)
    (spark / "metadata").write_text('{"id":"q1"}')
    upto = batches + (1 if in_flight else 0)
    for batch in range(upto):
        if (spark / "commits" / str(batch)).exists():
            continue  # Spark never rewrites a committed batch's files
        for log in ("offsets", "sources/0"):
            (spark / log).mkdir(parents=True, exist_ok=True)
            entry = {"path": f"{(task_dir / 'in' / f'f{batch}.parquet').as_uri()}", "batchId": batch}
            (spark / log / str(batch)).write_text("v1\n" + json.dumps(entry))
        (spark / "state" / "0" / "0").mkdir(parents=True, exist_ok=True)
        (spark / "state" / "0" / "0" / f"{batch + 1}.delta").write_bytes(os.urandom(64))
        if batch < batches:
            (spark / "commits").mkdir(exist_ok=True)
            (spark / "commits" / str(batch)).write_text("v1\n{}")
            out = task_dir / "out" / "squares" / f"b{batch:010d}"
            out.mkdir(parents=True, exist_ok=True)
            (out / "part-00000.parquet").write_bytes(os.urandom(2000))
            (out / ".part-00000.parquet.crc").write_bytes(b"crc")
    (spark / "commits" / ".2.abc.tmp").write_text("a temporary Spark has not renamed yet")


def files(task_dir):
    return {
        p.relative_to(task_dir).as_posix(): p.read_bytes()
        for p in task_dir.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }
