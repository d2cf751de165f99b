"""A checkpointed stage's stream on the executors' data path: the manifests' objects read in
micro-batches, each micro-batch's output written by the executors inside the query, the whole
assembled at the end.

**Input.** Spark's ``rate-micro-batch`` source counts 0, 1, 2, … with ``per_batch`` numbers in each
micro-batch, and its offsets are in Spark's checkpoint. Number *i* is the *i*-th object the input's
manifests list, read and verified by an executor (``ReadObjects``, as an ordinary read). Micro-batch *b*
therefore reads objects [*b*·k, (*b*+1)·k) whichever try runs it: Spark's checkpoint alone says where a
resumed query goes on, and no Python runs in the driver to plan a batch.

**Output.** The query's last step (``StreamObjects``) is the executors' writer: each task writes its
rows of micro-batch *b* (Spark's ``streaming.sql.batchId``) into one object under ``<stream>b<b>/t<try>/``
and then a marker naming it (``_task-p<partition>-a<attempt>.json``, a record of one file; partition
0's task leaves one even without rows, so that every micro-batch that ran is seen in the store); the
rows it returns go to Spark's ``noop`` sink. No ``foreachBatch``: that would start a Python process
in the driver for every query (~1.5 s) and make its first micro-batch a second slower. Spark commits
micro-batch *b* only once every task of it succeeded, so a committed micro-batch has a marker for
every partition that had rows. Once the last micro-batch is done, ``assemble`` takes, for each
micro-batch of the output (complete mode: the last alone, which holds the whole result), the markers
of the newest try that ran it (the run Spark committed: an older try's run of it failed) and one task
attempt per partition (a retried or speculative task may have left two), and copies their objects
inside S3 into the try's attempt prefix under one record, which the operator commits as any
executors' write. The Airflow worker moves markers, never rows.

Stdlib, pyarrow and pyspark only: shipped to the Spark side with the other ``spark/`` modules.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .object_files import s3_filesystem
from .partition_objects import EMPTY_SCHEMA, ReadObjects, WriteObjects, WriteTarget, bucket_and_prefix
from .spec import StoreCredentials, StoredObject
from .written import MAX_RECORD_BYTES, WrittenFile, encode_written, parse_written

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

POLL_SECONDS = 0.1  # how soon after its last micro-batch the query is stopped (the source counts on)
MAX_READ_TASKS = 200  # numbers (objects) a micro-batch spreads over at most
COPY_THREADS = 16  # server-side copies (and marker reads) at once while the output is assembled
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # the local property Spark gives a micro-batch's tasks
WRITTEN_COLUMNS = "key STRING, size LONG, checksum STRING, rows LONG"  # what the writing step returns
_MARKER = re.compile(r"b(\d{6})/t(\d{3,})/_task-p(\d{5})-a(\d+)\.json")


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


def batch_prefix(batch_id: int) -> str:
    return f"b{batch_id:06d}/"


def try_folder(batch_id: int, try_number: int) -> str:
    """Where micro-batch ``batch_id``'s run by try ``try_number`` writes, under the stream prefix."""
    return f"{batch_prefix(batch_id)}t{try_number:03d}/"


def marker_name(partition: int, attempt: int) -> str:
    return f"_task-p{partition:05d}-a{attempt}.json"


class InvalidStreamMarker(ValueError):
    """A marker under the stream prefix that is not one a writing task left: the output cannot be
    assembled, and a restart resumes from the same micro-batches, so it fails alike."""


@dataclass(frozen=True)
class TaskMarker:
    """A writing task's marker, from its key under the stream prefix."""

    batch_id: int
    try_number: int
    partition: int
    attempt: int
    key: str  # under the stream prefix


def task_markers(keys: Iterable[str]) -> list[TaskMarker]:
    """The markers among ``keys`` (relative to the stream prefix); any other key is not one."""
    markers = []
    for key in keys:
        if found := _MARKER.fullmatch(key):
            batch_id, try_number, partition, attempt = map(int, found.groups())
            markers.append(TaskMarker(batch_id, try_number, partition, attempt, key))
    return markers


def chosen_markers(markers: Iterable[TaskMarker], wanted: Iterable[int]) -> list[TaskMarker]:
    """For each wanted micro-batch, the markers of the newest try that ran it, one task attempt (the
    first) per partition: the run Spark committed, each partition once."""
    by_batch: dict[int, list[TaskMarker]] = {}
    for marker in markers:
        by_batch.setdefault(marker.batch_id, []).append(marker)
    chosen = []
    for batch_id in wanted:
        runs = by_batch.get(batch_id, [])
        if not runs:
            continue  # no partition of it had rows
        newest = max(m.try_number for m in runs)
        first: dict[int, TaskMarker] = {}
        for marker in sorted(runs, key=lambda m: m.attempt):
            if marker.try_number == newest:
                first.setdefault(marker.partition, marker)
        chosen += [first[p] for p in sorted(first)]
    return chosen


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
class StreamObjects:
    """The query's writing step: a task of micro-batch *b* (of ``batches``) writes its rows into one
    object under ``<stream>b<b>/t<try>/``, then its marker; later micro-batches (the rate source counts
    on) write nothing. Fails after writing in micro-batch ``fail_in`` (fault injection), so that Spark
    does not commit it, with the text ``injected``."""

    stream: str  # s3://bucket/prefix/ of the stage's micro-batch outputs
    batches: int
    try_number: int
    options: Mapping[str, str]
    credentials: StoreCredentials | None = field(default=None, repr=False)
    compression: str = "snappy"
    fail_in: int | None = None
    injected: str = ""
    __name__ = "write_stream_objects"  # how Spark names the step in plans and its UI

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        task = TaskContext.get()
        batch_property = task.getLocalProperty(BATCH_ID_PROPERTY) if task else None
        if task is None or batch_property is None:
            raise RuntimeError("write_stream_objects runs in the tasks of a streaming query's micro-batch")
        batch_id = int(batch_property)
        if batch_id >= self.batches:
            for _ in batches:  # past the input: nothing to write
                pass
            return
        bucket, prefix = bucket_and_prefix(self.stream)
        folder = f"{prefix}{try_folder(batch_id, self.try_number)}"
        target = WriteTarget(bucket, folder, dict(self.options), self.credentials, self.compression)
        filesystem = functools.cache(target.filesystem)  # one S3 client for the object and its marker
        written = list(WriteObjects(target).write(batches, filesystem))  # a row, or none without rows
        files = [WrittenFile(**row) for batch in written for row in batch.to_pylist()]
        if files or task.partitionId() == 0:  # partition 0 always: every micro-batch leaves a marker
            marker = f"{bucket}/{folder}{marker_name(task.partitionId(), task.attemptNumber())}"
            with filesystem().open_output_stream(marker) as out:
                out.write(encode_written(files))
        if self.fail_in is not None and batch_id == self.fail_in:
            raise RuntimeError(self.injected)
        yield from written


def start_writing(df: DataFrame, write: StreamObjects, *, mode: str, checkpoint: str) -> Any:
    """The query's writer: ``write`` as its last step, its rows to Spark's ``noop`` sink."""
    return (
        df.mapInArrow(write, WRITTEN_COLUMNS)
        .writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
    )


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
    schema: pa.Schema,
    compression: str,
    options: Mapping[str, str],
    credentials: StoreCredentials | None,
) -> int:
    """The output of micro-batches 0…``batches``-1 (complete: the last alone) copied inside S3 from the
    chosen markers' objects into the attempt prefix, under one ``_ft_written.json`` (an output without
    rows: one empty object of ``schema``); the rows it holds."""
    from pyarrow.fs import FileSelector

    filesystem = s3_filesystem(options, credentials)
    source = stream.removeprefix("s3://")
    listing = filesystem.get_file_info(FileSelector(source.rstrip("/"), recursive=True, allow_not_found=True))
    keys = [info.path.removeprefix(source) for info in listing]
    wanted = [batches - 1] if complete else list(range(batches))
    chosen = chosen_markers(task_markers(keys), wanted)

    def files_of(marker: TaskMarker) -> list[WrittenFile]:
        with filesystem.open_input_stream(f"{source}{marker.key}") as handle:
            data = handle.read(MAX_RECORD_BYTES + 1)  # a larger one is refused unread
        try:
            return parse_written(data)
        except ValueError as err:
            raise InvalidStreamMarker(
                f"s3://{source}{marker.key} is not a marker this stage's writing tasks leave ({err}); "
                f"nothing was published. A restart resumes from the same micro-batches and would fail "
                f"alike: remove s3://{source} (the stream's micro-batch outputs) and clear the task, so "
                "that the stage computes its stream again"
            ) from None

    bucket, prefix = bucket_and_prefix(attempt.rstrip("/") + "/")
    target = WriteTarget(bucket, prefix, dict(options), credentials, compression)
    with ThreadPoolExecutor(COPY_THREADS) as pool:  # each request S3 serves in its own time
        written = list(pool.map(files_of, chosen))
        copies = [
            (f"{source}{marker.key.rpartition('/')[0]}/{entry.key}", f"{bucket}/{prefix}{entry.key}")
            for marker, files in zip(chosen, written, strict=True)
            for entry in files
        ]
        for _ in pool.map(lambda pair: filesystem.copy_file(*pair), copies):
            pass
    files = [entry for files in written for entry in files]
    if not files:
        files = [target.write_empty(filesystem, schema)]
    target.record(filesystem, files)
    return sum(f.rows for f in files)
