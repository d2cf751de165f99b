"""A checkpointed stage's stream on the executors' data path: the manifests' objects read in
micro-batches, each micro-batch's output written by the executors, the whole assembled at the end.

**Input.** Spark's ``rate-micro-batch`` source counts 0, 1, 2, … with ``per_batch`` numbers in each
micro-batch, and its offsets are in Spark's checkpoint. Number *i* is the *i*-th object the input's
manifests list, read and verified by an executor (``ReadObjects``, as an ordinary read). Micro-batch *b*
therefore reads objects [*b*·k, (*b*+1)·k) whichever try runs it: Spark's checkpoint alone says where a
resumed query goes on, and no Python runs in the driver to plan a batch.

**Output.** ``foreachBatch`` (``BatchObjects``) writes micro-batch *b*'s rows under ``<stream>b<b>/``
with the executors' writer (objects, then their ``_ft_written.json``). A micro-batch run again (its try
failed before Spark committed it) overwrites its record, so every record lists one run's objects. Once
the last micro-batch is done, the records of batches 0…B-1 (complete mode: B-1 alone, which holds the
whole result) are the output: ``assemble`` copies their objects inside S3 into the try's attempt prefix
under one record, which the operator commits as any executors' write. The Airflow worker moves records,
never rows.

Stdlib, pyarrow and pyspark only: shipped to the Spark side with the other ``spark/`` modules.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .object_files import s3_filesystem
from .partition_objects import EMPTY_SCHEMA, ReadObjects, write_objects
from .spec import StoreCredentials, StoredObject
from .written import WRITTEN_RECORD, WrittenFile, encode_written, written_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

POLL_SECONDS = 0.1  # how soon after its last micro-batch the query is stopped (the source counts on)
MAX_READ_TASKS = 200  # numbers (objects) a micro-batch spreads over at most
COPY_THREADS = 16  # server-side copies at once while the output is assembled


def batches_needed(objects: int, per_batch: int) -> int:
    """Micro-batches that read ``objects`` objects, ``per_batch`` at a time (at least one: an input
    without objects still makes one empty micro-batch, whose output is the empty result)."""
    return max(1, -(-objects // per_batch))


def per_batch(sizes: Sequence[int], volume: int) -> int:
    """Objects a micro-batch reads: as many as ``volume`` bytes (``interval-volume``) hold on average,
    at least one. The same inputs give the same count, so a resumed query's batches stay the same."""
    if not sizes:
        return 1
    average = max(1, sum(sizes) // len(sizes))
    return max(1, volume // average)


def stream_objects(
    spark: SparkSession,
    objects: Sequence[StoredObject],
    options: Mapping[str, str],
    credentials: StoreCredentials | None,
    *,
    per_batch: int,
) -> DataFrame:
    """The objects' rows as a streaming DataFrame, ``per_batch`` objects per micro-batch."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    if objects:
        with s3_filesystem(options, credentials).open_input_file(objects[0].key) as handle:
            schema = from_arrow_schema(pq.read_schema(handle))
    else:
        schema = spark.createDataFrame([], EMPTY_SCHEMA).schema
    numbers = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", per_batch)
        .option("numPartitions", max(1, min(per_batch, MAX_READ_TASKS)))
        .load()
        .select("value")
        .where(F.col("value") < len(objects))
    )
    return numbers.mapInArrow(ReadObjects(tuple(objects), dict(options), credentials), schema)


@dataclass(frozen=True)
class BatchObjects:
    """The ``foreachBatch`` function: micro-batch *b* (of ``batches``) under ``<stream>b<b>/``; later ones
    (the rate source goes on counting) write nothing. Fails after writing ``fail_in`` (fault injection),
    before Spark commits it, with the text ``injected``."""

    stream: str  # s3://bucket/prefix/ of the stage's micro-batch outputs
    batches: int
    options: Mapping[str, str]
    credentials: StoreCredentials | None = field(default=None, repr=False)
    compression: str = "snappy"
    fail_in: int | None = None
    injected: str = ""

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if batch_id >= self.batches:
            return
        write_objects(
            batch,
            f"{self.stream}{batch_prefix(batch_id)}",
            self.options,
            self.credentials,
            compression=self.compression,
            record_here=True,  # this process is the Spark server's: one job per micro-batch
        )
        if self.fail_in is not None and batch_id == self.fail_in:
            raise RuntimeError(self.injected)


def batch_prefix(batch_id: int) -> str:
    return f"b{batch_id:06d}/"


def run_to_end(query: Any, batches: int) -> list[int]:
    """Wait until micro-batch ``batches - 1`` is done, then stop the query (its source counts on); the
    micro-batches this query ran. A failed query's exception is raised."""
    ran: set[int] = set()
    while True:
        for progress in query.recentProgress or ():
            if progress is not None and getattr(progress, "numInputRows", None) is not None:
                ran.add(int(progress.batchId))
        if ran and max(ran) >= batches - 1:
            query.stop()
            return sorted(b for b in ran if b < batches)
        if not query.isActive:
            failure = query.exception()
            if failure is not None:
                raise RuntimeError(f"the checkpointed stage's streaming query failed: {failure}")
            raise RuntimeError("the checkpointed stage's streaming query stopped before its last micro-batch")
        time.sleep(POLL_SECONDS)


def assemble(
    stream: str,
    attempt: str,
    batches: int,
    *,
    complete: bool,
    options: Mapping[str, str],
    credentials: StoreCredentials | None,
) -> int:
    """The output of micro-batches 0…``batches``-1 (complete: the last alone) copied inside S3 from the
    stream's records into the attempt prefix, under one ``_ft_written.json``; the rows it holds."""
    filesystem = s3_filesystem(options, credentials)
    source = stream.removeprefix("s3://")
    target = attempt.removeprefix("s3://").rstrip("/") + "/"
    wanted = [batches - 1] if complete else list(range(batches))
    files: list[WrittenFile] = []
    copies: list[tuple[str, str]] = []  # (from, to)
    for batch_id in wanted:
        prefix = f"{source}{batch_prefix(batch_id)}"
        try:
            with filesystem.open_input_stream(f"{prefix}{WRITTEN_RECORD}") as record:
                written = written_files(json.loads(record.read()))
        except FileNotFoundError:
            raise RuntimeError(
                f"micro-batch {batch_id} of {stream} has no record of its output: the stream's objects were "
                "removed while the stage ran"
            ) from None
        copies += [(f"{prefix}{entry.key}", f"{target}{entry.key}") for entry in written]
        files += written
    with ThreadPoolExecutor(COPY_THREADS) as pool:  # each copy is one request S3 serves in its own time
        for _ in pool.map(lambda pair: filesystem.copy_file(*pair), copies):
            pass
    with filesystem.open_output_stream(f"{target}{WRITTEN_RECORD}") as out:
        out.write(encode_written(sorted(files, key=lambda f: f.key)))
    return sum(f.rows for f in files)
