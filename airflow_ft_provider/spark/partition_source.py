"""Result partitions read and written by Spark's executors themselves: writes through pyspark's Python
Data Source API, reads through ``mapInArrow``.

    spark.dataSource.register(PartitionSource)
    df.write.format("ft_partition").mode("append").options(**access, target=...).save()
    df = read_objects(spark, manifest_objects, access, credentials)

**Writes.** Each Spark task writes one Parquet object under the try's attempt prefix, named after its
partition and task attempt (``part-00003-a1-<uuid>.parquet``), and hashes the bytes as they stream to
S3: its commit message carries the object's key, size, checksum and rows. Spark hands the driver the
messages of the task attempts it committed, and only those: ``PartitionWriter.commit`` records them in
``_ft_written.json`` under the attempt prefix, the list the operator builds the manifest from. The
objects of a task attempt Spark did not commit (a lost executor's, a speculative duplicate's) are in no
list, so they never add rows; the store's garbage collection removes them with the attempt.

**Reads.** One Spark partition per object the manifest lists: the executor reads the object, checks its
size and checksum against the manifest's entry, then decodes it. A changed object fails the read with
``PartitionDataCorrupt``, naming the object: Spark never reads unverified bytes. Reads need no commit,
so they are a plain ``mapInArrow`` over the objects' numbers rather than a data source: Spark starts a
data source's planning in Python processes of the driver, afresh for every session (they are keyed by
the session's artifact UUID and kept until the server stops), and every stage try is a session.

The Airflow worker handles only the kilobytes around this (the manifest, ``_ft_written.json``, the
footer that gives a read its schema); the data flows between the executors and S3. Stdlib, pyarrow
and pyspark only: this module is shipped to the Spark driver and executors
(``execution/submit.runtime_zip``).

**Credentials** come from the executors' own environment (an instance role, ``AWS_*`` variables, a
profile: pyarrow's default chain), unless a key pair is given, for deployments without one. The pair
is never an option (options are part of the plan Spark's UI and event log show): it is a class
attribute of the registered source (``source_with``), or a field of ``ReadObjects``, which Spark
pickles by value into the Python commands it sends its executors.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from .checksums import DEFAULT_CHECKSUM, new_hasher
from .spec import StoreAccess, StoreCredentials, StoredObject
from .written import WRITTEN_RECORD, WrittenFile, encode_written

if TYPE_CHECKING:
    import pyarrow as pa
    from pyarrow.fs import S3FileSystem
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

SOURCE_NAME = "ft_partition"
EMPTY_SCHEMA = "value STRING"  # the schema of an input without objects

__all__ = [
    "SOURCE_NAME",
    "PartitionDataCorrupt",
    "PartitionSource",
    "ReadObjects",
    "access_options",
    "read_objects",
    "read_verified",
    "source_with",
]


class PartitionDataCorrupt(IOError):
    """An object a manifest lists is not the object that was committed (size or checksum differs)."""


@dataclass(frozen=True)
class TaskCommit(WriterCommitMessage):
    """What one task attempt tells the driver: its object (None for an empty Spark partition)."""

    written: WrittenFile | None


def s3_filesystem(options: Mapping[str, str], credentials: StoreCredentials | None = None) -> S3FileSystem:
    """pyarrow's S3 client as the options say; credentials from the environment unless given."""
    from pyarrow.fs import S3FileSystem

    endpoint = options.get("endpoint") or None
    kwargs: dict[str, object] = {"region": options.get("region") or "us-east-1"}
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs.update(endpoint_override=host or scheme, scheme=scheme if host else "https")
    if credentials is not None:
        kwargs.update(
            access_key=credentials.access_key,
            secret_key=credentials.secret_key,
            session_token=credentials.session_token,
        )
    return S3FileSystem(**kwargs)


def access_options(access: StoreAccess) -> dict[str, str]:
    """The options that tell executors where the store is (only those that are set; no secret)."""
    return {name: value for name, value in asdict(access).items() if value}


class _HashingSink(io.RawIOBase):
    """A file object for pyarrow's Parquet writer: hashes and counts what it forwards to S3."""

    def __init__(self, stream: Any, checksum: str) -> None:
        self._stream = stream
        self._hasher = new_hasher(checksum)
        self._algorithm = checksum
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._hasher.update(chunk)
        self._stream.write(chunk)
        self.size += len(chunk)
        return len(chunk)

    def close(self) -> None:
        if not self.closed:
            self._stream.close()  # completes the upload: the object exists only now
        super().close()

    @property
    def checksum(self) -> str:
        return f"{self._algorithm}:{self._hasher.hexdigest()}"


class PartitionWriter(DataSourceArrowWriter):
    """Runs in the executors (``write``) and once in the driver (``commit``/``abort``)."""

    def __init__(
        self, options: Mapping[str, str], credentials: StoreCredentials | None, schema: StructType
    ) -> None:
        self.options = dict(options)
        self.credentials = credentials
        self.schema = schema
        self.bucket, self.prefix = _bucket_and_prefix(self.options["target"])
        self.checksum = self.options.get("checksum") or DEFAULT_CHECKSUM
        self.compression = self.options.get("compression") or "snappy"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        """One object per task attempt, opened with the first batch: an empty partition writes none."""
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        task = TaskContext.get()
        partition, attempt = (task.partitionId(), task.attemptNumber()) if task else (0, 0)
        name = f"part-{partition:05d}-a{attempt}-{uuid.uuid4().hex[:12]}.parquet"
        rows, sink, writer = 0, None, None
        try:
            for batch in iterator:
                if writer is None:
                    sink = self._open(s3_filesystem(self.options, self.credentials), name)
                    writer = pq.ParquetWriter(sink, batch.schema, compression=self.compression)
                writer.write_batch(batch)
                rows += batch.num_rows
            if writer is None or sink is None:
                return TaskCommit(None)
            writer.close()
        finally:
            if sink is not None:
                sink.close()
        return TaskCommit(WrittenFile(key=name, size=sink.size, checksum=sink.checksum, rows=rows))

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        files = [m.written for m in messages if isinstance(m, TaskCommit) and m.written is not None]
        filesystem = s3_filesystem(self.options, self.credentials)
        if not files:  # no row at all: one empty object keeps the schema for readers (as Spark's writer)
            files = [self._write_empty(filesystem)]
        with filesystem.open_output_stream(f"{self.bucket}/{self.prefix}{WRITTEN_RECORD}") as out:
            out.write(encode_written(files))

    def _write_empty(self, filesystem: S3FileSystem) -> WrittenFile:
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema

        name = f"part-00000-a0-{uuid.uuid4().hex[:12]}.parquet"
        sink = self._open(filesystem, name)
        try:
            pq.ParquetWriter(sink, to_arrow_schema(self.schema), compression=self.compression).close()
        finally:
            sink.close()
        return WrittenFile(key=name, size=sink.size, checksum=sink.checksum, rows=0)

    def _open(self, filesystem: S3FileSystem, name: str) -> _HashingSink:
        """A new object under the attempt prefix, hashed as it is written (it exists once closed)."""
        return _HashingSink(
            filesystem.open_output_stream(f"{self.bucket}/{self.prefix}{name}"), self.checksum
        )

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        filesystem = s3_filesystem(self.options, self.credentials)
        for message in messages:
            if isinstance(message, TaskCommit) and message.written is not None:
                try:
                    filesystem.delete_file(f"{self.bucket}/{self.prefix}{message.written.key}")
                except OSError:  # the attempt's leftovers go with it (gc); an abort must not hide the cause
                    pass


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
        import pyarrow.parquet as pq

        filesystem = None
        for batch in batches:
            for number in batch.column(0).to_pylist():
                filesystem = filesystem or s3_filesystem(self.options, self.credentials)
                data = read_verified(filesystem, self.objects[number])
                yield from pq.read_table(io.BytesIO(data)).to_batches()


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
    with s3_filesystem(options, credentials).open_input_file(objects[0].key) as handle:
        schema = from_arrow_schema(pq.read_schema(handle))
    count = len(objects)
    numbers = spark.range(0, count, 1, count)  # Spark partition i holds the one number i
    return numbers.mapInArrow(ReadObjects(tuple(objects), dict(options), credentials), schema)


class PartitionSource(DataSource):
    """``ft_partition``: a try's objects under its attempt prefix (write only)."""

    credentials: ClassVar[StoreCredentials | None] = None  # set by source_with (a class made per try)

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def writer(self, schema: StructType, overwrite: bool) -> PartitionWriter:
        return PartitionWriter(self.options, self.credentials, schema)


def source_with(credentials: StoreCredentials | None) -> type[PartitionSource]:
    """The source to register: with a key pair, a class of its own that carries it (pickled by value,
    as it is not this module's ``PartitionSource``), so the pair is in no option."""
    if credentials is None:
        return PartitionSource
    name = f"PartitionSourceWithCredentials_{uuid.uuid4().hex[:8]}"
    return type(name, (PartitionSource,), {"credentials": credentials, "__qualname__": name})


def read_verified(filesystem: S3FileSystem, stored: StoredObject) -> bytes:
    """The object's bytes, checked against the manifest's size and checksum as they are read."""
    hasher = new_hasher(stored.checksum)
    chunks = []
    with filesystem.open_input_stream(stored.key) as stream:
        while chunk := stream.read(8 << 20):
            hasher.update(chunk)
            chunks.append(chunk)
    data = b"".join(chunks)
    checksum = f"{stored.checksum.partition(':')[0]}:{hasher.hexdigest()}"
    if len(data) != stored.size or checksum != stored.checksum:
        raise PartitionDataCorrupt(
            f"s3://{stored.key}: {len(data)} bytes with {checksum}, but its manifest says {stored.size} "
            f"bytes with {stored.checksum}; the partition is corrupt (failover rebuilds it)"
        )
    return data


def _bucket_and_prefix(target: str) -> tuple[str, str]:
    bucket, _, prefix = target.removeprefix("s3://").partition("/")
    if not bucket or (prefix and not prefix.endswith("/")):
        raise ValueError(f"the target of {SOURCE_NAME} must be s3://bucket/prefix/, got {target!r}")
    return bucket, prefix
