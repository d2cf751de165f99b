"""Result partitions read and written by Spark's executors themselves, both as ``mapInArrow`` steps.

    written = write_objects(df, "s3://bucket/<attempt prefix>/", options, credentials)  # rows, content
    df = read_objects(spark, manifest_objects, options, credentials)

**Writes.** Each Spark task writes one Parquet object under the try's attempt prefix, named after its
partition and task attempt (``part-00003-a1-<uuid>.parquet``) in full row groups, hashes the bytes as
they stream to S3 (``object_files.py``), and returns one row: the object's key, size, checksum and rows
(``WriteObjects``). Those rows go through a shuffle to one last task (``RecordWritten``) that puts
``_ft_written.json`` under the attempt prefix: the list the operator builds the manifest from. A
shuffle reads each map partition's output from the one task attempt Spark registered, so the list holds
exactly the task attempts Spark committed: the object of an attempt lost after writing (a lost
executor's, a speculative duplicate's) is in no list and never adds rows; the store's garbage
collection removes it with the attempt. The rows' checksum (``content.py``) travels the same way: each
row's hash is one more column of the batches a task writes, summed there, and the committed task
attempts' sums add up in the record's task. A checkpointed stage's micro-batches (``object_stream.py``)
write with the same step inside the streaming query, each task leaving a marker of its object.

**Reads.** One Spark partition per object the manifest lists: the executor reads the object, checks its
size and checksum against the manifest's entry, then decodes it. A changed object fails the read with
``PartitionDataCorrupt``, naming the object: Spark never reads unverified bytes.

**Why no Python data source.** pyspark's Data Source API would carry the same commit messages, but
Spark plans a Python data source in Python processes of the driver, started afresh for every Spark
Connect session (they are keyed by the session's artifact UUID), and a new session for each try: a
fresh session's data-source write took ~4 s against ~1.9 s for these two steps (the executors' Python
workers, which any Python step needs, are the rest).

The Airflow worker handles only the kilobytes around this (the manifest, ``_ft_written.json``, the
footer that gives a read its schema); the data flows between the executors and S3. Stdlib, pyarrow
and pyspark only: this module is shipped to the Spark driver and executors
(``execution/submit.runtime_zip``).

**Credentials** come from the executors' own environment (an instance role, ``AWS_*`` variables, a
profile: pyarrow's default chain), unless a key pair is given, for deployments without one. The pair
is never an option or a column (the plan Spark's UI and event log show): it is a field of the step's
function object (``repr=False``), which Spark pickles by value into the commands it sends executors.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .checksums import DEFAULT_CHECKSUM, new_hasher
from .content import ROW_HASH_COLUMN, RowHashSums, as_long, checksum_of, row_hash
from .object_files import HashingSink, ParquetObjectWriter, s3_filesystem
from .spec import StoreAccess, StoreCredentials, StoredObject
from .written import WRITTEN_RECORD, WrittenFile, encode_written

if TYPE_CHECKING:
    import pyarrow as pa
    from pyarrow.fs import S3FileSystem
    from pyspark.sql import DataFrame, SparkSession

EMPTY_SCHEMA = "value STRING"  # the schema of an input without objects
# what the record's task returns to the driver: the sums are null without row hashes or beyond a LONG
RECORDED_COLUMNS = "files LONG, rows LONG, high LONG, low LONG"

__all__ = [
    "PartitionDataCorrupt",
    "ReadObjects",
    "RecordWritten",
    "WriteObjects",
    "WriteResult",
    "WriteTarget",
    "access_options",
    "bucket_and_prefix",
    "read_objects",
    "read_verified",
    "write_objects",
]


class PartitionDataCorrupt(IOError):
    """An object a manifest lists is not the object that was committed (size or checksum differs), or
    is gone: lost data, which backtracking rebuilds (``failover/classification.py``)."""


def access_options(access: StoreAccess) -> dict[str, str]:
    """The options that tell executors where the store is (only those that are set; no secret)."""
    return {name: value for name, value in asdict(access).items() if value}


@dataclass(frozen=True)
class WriteTarget:
    """Where a try's objects go, and how they are written (pickled into the executors' commands)."""

    bucket: str
    prefix: str  # the attempt prefix, ending in "/"
    options: Mapping[str, str]
    credentials: StoreCredentials | None = field(default=None, repr=False)
    compression: str = "snappy"
    checksum: str = DEFAULT_CHECKSUM
    row_hashes: bool = False  # each batch's last column is its rows' hashes: summed, not written

    def filesystem(self) -> S3FileSystem:
        return s3_filesystem(self.options, self.credentials)

    def open(self, filesystem: S3FileSystem, name: str) -> HashingSink:
        """A new object under the attempt prefix, hashed as it is written (it exists once closed)."""
        return HashingSink(filesystem.open_output_stream(f"{self.bucket}/{self.prefix}{name}"), self.checksum)

    def write_empty(self, filesystem: S3FileSystem, schema: pa.Schema) -> WrittenFile:
        """An object of no rows that keeps ``schema`` for readers (as Spark's own writer does)."""
        name = f"part-00000-a0-{uuid.uuid4().hex[:12]}.parquet"
        sink = self.open(filesystem, name)
        try:
            ParquetObjectWriter(sink, schema, self.compression).close()
        finally:
            sink.close()
        return WrittenFile(key=name, size=sink.size, checksum=sink.checksum, rows=0)

    def record(self, filesystem: S3FileSystem, files: Sequence[WrittenFile]) -> None:
        """``_ft_written.json`` under the attempt prefix: the files the manifest is built from."""
        with filesystem.open_output_stream(f"{self.bucket}/{self.prefix}{WRITTEN_RECORD}") as out:
            out.write(encode_written(sorted(files, key=lambda f: f.key)))


@dataclass(frozen=True)
class WriteResult:
    """What a write put under its attempt prefix: the rows, and their checksum (``content.py``; None
    where the rows get none)."""

    rows: int
    content: str | None


@dataclass(frozen=True)
class WriteObjects:
    """What each writing Spark task runs: its rows into one object, opened with the first batch (an
    empty Spark partition writes none); yields that object's row (``_written_schema``), with the sums
    of its rows' hashes when the target says the batches carry them."""

    target: WriteTarget
    __name__ = "write_partition_objects"  # how Spark names the step in plans and its UI

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return self.write(batches, self.target.filesystem)

    def write(
        self, batches: Iterator[pa.RecordBatch], filesystem: Callable[[], S3FileSystem]
    ) -> Iterator[pa.RecordBatch]:
        """As a call, with the S3 client ``filesystem()`` gives (asked for only when there are rows)."""
        import pyarrow as pa
        from pyspark import TaskContext

        task = TaskContext.get()
        partition, attempt = (task.partitionId(), task.attemptNumber()) if task else (0, 0)
        name = f"part-{partition:05d}-a{attempt}-{uuid.uuid4().hex[:12]}.parquet"
        sums = RowHashSums() if self.target.row_hashes else None
        sink, writer = None, None
        try:
            for batch in batches:
                if sums is not None:
                    batch = sums.take(batch)
                if writer is None:
                    sink = self.target.open(filesystem(), name)
                    writer = ParquetObjectWriter(sink, batch.schema, self.target.compression)
                writer.write(batch)
            if writer is None or sink is None:
                return
            writer.close()
        finally:
            if sink is not None:
                sink.close()
        written = asdict(WrittenFile(key=name, size=sink.size, checksum=sink.checksum, rows=writer.rows))
        if sums is not None:
            written.update(high=sums.high, low=sums.low)
        yield pa.RecordBatch.from_pylist([written], schema=_written_schema(self.target.row_hashes))


@dataclass(frozen=True)
class RecordWritten:
    """What the one task after the shuffle runs: ``_ft_written.json`` from the rows of the committed
    task attempts (with no row at all, one empty object keeps the schema for readers, as Spark's own
    writer does); yields the count of files and rows, and the sums of their row hashes (null without
    them, or beyond a LONG)."""

    target: WriteTarget
    schema: pa.Schema  # of the rows written: the empty object's
    __name__ = "record_written_objects"

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        rows = [row for batch in batches for row in batch.to_pylist()]
        files = [WrittenFile(row["key"], row["size"], row["checksum"], row["rows"]) for row in rows]
        filesystem = self.target.filesystem()
        if not files:
            files = [self.target.write_empty(filesystem, self.schema)]
        self.target.record(filesystem, files)
        high, low = (_total(rows, half) if self.target.row_hashes else None for half in ("high", "low"))
        recorded = {"files": len(files), "rows": sum(f.rows for f in files), "high": high, "low": low}
        yield pa.RecordBatch.from_pylist([recorded], schema=_recorded_schema())


def _total(rows: list[dict[str, Any]], half: str) -> int | None:
    """The sum of the objects' sums of one half of their row hashes; None past a LONG, as Spark's."""
    values = [row[half] for row in rows]
    if any(value is None for value in values):
        return None
    return as_long(sum(values))


def _written_schema(row_hashes: bool = False) -> pa.Schema:
    """The rows of the write step: one per object written (a ``WrittenFile``), with its row hashes'
    sums where it has them."""
    import pyarrow as pa

    fields = [("key", pa.string()), ("size", pa.int64()), ("checksum", pa.string()), ("rows", pa.int64())]
    return pa.schema(fields + ([("high", pa.int64()), ("low", pa.int64())] if row_hashes else []))


def _recorded_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([(name, pa.int64()) for name in ("files", "rows", "high", "low")])


def write_objects(
    df: DataFrame,
    target: str,
    options: Mapping[str, str],
    credentials: StoreCredentials | None = None,
    *,
    compression: str = "snappy",
    checksum: str = DEFAULT_CHECKSUM,
    row_checksum: bool = True,
    task_writer: type[WriteObjects] = WriteObjects,
) -> WriteResult:
    """Write ``df`` under the attempt prefix ``target`` (``s3://bucket/prefix/``) from the executors,
    record the committed task attempts' objects in ``_ft_written.json``; the rows written and their
    checksum (``row_checksum=False``: none, not computed). ``task_writer``: what each task runs (a
    test's may fail after writing). The record is written by a last Spark task, not by this process: a
    try's client may be lost after Spark finished, and adoption reads the record."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    bucket, prefix = bucket_and_prefix(target)
    hashed = row_hash(df) if row_checksum else None
    rows_out = (
        df if hashed is None else df.select(*[df[c] for c in df.columns], hashed.alias(ROW_HASH_COLUMN))
    )
    where = WriteTarget(bucket, prefix, dict(options), credentials, compression, checksum, hashed is not None)
    written = rows_out.mapInArrow(task_writer(where), from_arrow_schema(_written_schema(where.row_hashes)))
    record = RecordWritten(where, to_arrow_schema(df.schema))
    [recorded] = written.repartition(1).mapInArrow(record, RECORDED_COLUMNS).collect()
    rows = int(recorded["rows"])
    content = None
    if hashed is not None:
        content = checksum_of(df.schema.simpleString(), rows, recorded["high"], recorded["low"])
    return WriteResult(rows, content)


@dataclass(frozen=True)
class ReadObjects:
    """What each reading Spark task runs: the objects of its numbers (one per task), verified. Its
    fields are pickled by value into the executors' command, the credentials too: no option, no plan
    and no log shows them."""

    objects: tuple[StoredObject, ...]
    options: Mapping[str, str]
    credentials: StoreCredentials | None = field(default=None, repr=False)
    __name__ = "read_partition_objects"  # how Spark names the step in plans and its UI

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        filesystem = None
        for batch in batches:
            for number in batch.column(0).to_pylist():
                filesystem = filesystem or s3_filesystem(self.options, self.credentials)
                data = read_verified(filesystem, self.objects[number])
                yield from pq.read_table(pa.BufferReader(data)).to_batches()


def read_objects(
    spark: SparkSession,
    objects: Sequence[StoredObject],
    options: Mapping[str, str],
    credentials: StoreCredentials | None = None,
) -> DataFrame:
    """The objects' rows, one Spark partition per object, each verified by the executor that reads it.
    The schema is the first object's, from its Parquet footer (a ranged read by the driver)."""
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema

    if not objects:
        return spark.createDataFrame([], EMPTY_SCHEMA)
    try:
        with s3_filesystem(options, credentials).open_input_file(objects[0].key) as handle:
            schema = from_arrow_schema(pq.read_schema(handle))
    except FileNotFoundError:
        raise _gone(objects[0]) from None
    count = len(objects)
    numbers = spark.range(0, count, 1, count)  # Spark partition i holds the one number i
    return numbers.mapInArrow(ReadObjects(tuple(objects), dict(options), credentials), schema)


def read_verified(filesystem: S3FileSystem, stored: StoredObject) -> bytes:
    """The object's bytes, checked against the manifest's size and checksum before anything decodes
    them. One GET for the whole object (a HEAD first: its size); pyarrow's input stream would GET it
    in ranges, one per read."""
    try:
        with filesystem.open_input_file(stored.key) as handle:
            data = handle.read()
    except FileNotFoundError:
        raise _gone(stored) from None
    hasher = new_hasher(stored.checksum)
    hasher.update(data)
    checksum = f"{stored.checksum.partition(':')[0]}:{hasher.hexdigest()}"
    if len(data) != stored.size or checksum != stored.checksum:
        raise PartitionDataCorrupt(
            f"s3://{stored.key}: {len(data)} bytes with {checksum}, but its manifest says {stored.size} "
            f"bytes with {stored.checksum}; the partition is corrupt (failover rebuilds it)"
        )
    return data


def _gone(stored: StoredObject) -> PartitionDataCorrupt:
    """An object its manifest lists was deleted after the try's check: the partition is lost."""
    return PartitionDataCorrupt(
        f"s3://{stored.key} is gone, but its manifest lists it; the partition is lost (failover rebuilds it)"
    )


def bucket_and_prefix(target: str) -> tuple[str, str]:
    bucket, _, prefix = target.removeprefix("s3://").partition("/")
    if not bucket or (prefix and not prefix.endswith("/")):
        raise ValueError(f"a write's target must be s3://bucket/prefix/, got {target!r}")
    return bucket, prefix
