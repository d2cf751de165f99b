"""One executor's S3 objects: the client, and a Parquet object written in full row groups and hashed as
its bytes stream to S3 (``partition_objects.py`` writes one per Spark task).

**Row groups.** A ``mapInArrow`` step receives Arrow batches of ``spark.sql.execution.arrow.
maxRecordsPerBatch`` rows (10,000 by default). Written one by one, each would be a Parquet row group of
its own: a larger file, slower to encode and to read. ``ParquetObjectWriter`` gathers them into row groups
of ``ROW_GROUP_BYTES`` of Arrow data, as Spark's own writer does with its block size.

**The S3 client's request checksum.** The AWS SDK computes a CRC of every upload by default and sends it
in a chunked body. The object's checksum that the manifest records is computed here anyway, and every
executor that reads the object verifies it, so the SDK's is a second hash of the same bytes (and its
chunked encoding costs the endpoint too: 30 % of moto's CPU per PUT here). ``s3_filesystem`` therefore
makes its clients ask for one only where S3 requires it, unless the environment already says otherwise
(``AWS_REQUEST_CHECKSUM_CALCULATION``). In transit, TLS guards the bytes, as with any S3 client.

Stdlib and pyarrow only: shipped to the Spark side with the other ``spark/`` modules.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .checksums import new_hasher
from .spec import StoreCredentials

if TYPE_CHECKING:
    import pyarrow as pa
    from pyarrow.fs import S3FileSystem

ROW_GROUP_BYTES = 64 << 20  # Arrow data per row group (Spark's Parquet block size is 128 MiB, encoded)
REQUEST_CHECKSUM_ENV = "AWS_REQUEST_CHECKSUM_CALCULATION"


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
    with _sdk_checksum_only_where_required():
        return S3FileSystem(**kwargs)


@contextlib.contextmanager
def _sdk_checksum_only_where_required() -> Iterator[None]:
    """The SDK reads ``AWS_REQUEST_CHECKSUM_CALCULATION`` when a client is made (pyarrow has no option
    for it); set for that moment only, so that the process's other S3 clients (boto3's in an Airflow
    worker) keep theirs. A value the environment already has is kept."""
    if REQUEST_CHECKSUM_ENV in os.environ:
        yield
        return
    os.environ[REQUEST_CHECKSUM_ENV] = "when_required"
    try:
        yield
    finally:
        os.environ.pop(REQUEST_CHECKSUM_ENV, None)


class HashingSink(io.RawIOBase):
    """A file object for pyarrow's Parquet writer: hashes and counts what it forwards to S3."""

    def __init__(self, stream: Any, checksum: str) -> None:
        self._stream = stream
        self._hasher = new_hasher(checksum)
        self._algorithm = checksum
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)  # pyarrow hands bytes already: no copy
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


class ParquetObjectWriter:
    """Arrow batches into one Parquet object through ``sink``, ``ROW_GROUP_BYTES`` to a row group."""

    def __init__(self, sink: HashingSink, schema: pa.Schema, compression: str) -> None:
        import pyarrow.parquet as pq

        self._writer = pq.ParquetWriter(sink, schema, compression=compression)
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self.rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:  # nothing to store, and a row group cannot be empty
            return
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self._pending_bytes >= ROW_GROUP_BYTES:
            self._flush()

    def close(self) -> None:
        """Write what is pending and the footer (the sink stays open: its owner closes it)."""
        self._flush()
        self._writer.close()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._pending:
            table = pa.Table.from_batches(self._pending)
            self._writer.write_table(table, row_group_size=table.num_rows)
        self._pending, self._pending_bytes = [], 0
