"""How an executor writes one object (spark/object_files.py): Arrow batches gathered into full Parquet
row groups, the bytes hashed as they pass; the S3 client's own request checksum only where required."""

import io
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_ft_provider.spark import object_files
from airflow_ft_provider.spark.checksums import new_hasher
from airflow_ft_provider.spark.object_files import (
    REQUEST_CHECKSUM_ENV,
    HashingSink,
    ParquetObjectWriter,
    s3_filesystem,
)


class _Stream(io.BytesIO):
    """Stands for pyarrow's S3 output stream: keeps what it is given after close()."""

    def close(self) -> None:
        self.kept = self.getvalue()
        super().close()


def _batches(count: int, rows: int) -> list[pa.RecordBatch]:
    return [
        pa.RecordBatch.from_pydict({"id": list(range(b * rows, (b + 1) * rows)), "pad": ["x" * 40] * rows})
        for b in range(count)
    ]


def _write(batches: list[pa.RecordBatch]) -> tuple[HashingSink, ParquetObjectWriter, bytes]:
    stream = _Stream()
    sink = HashingSink(stream, "crc32c")
    writer = ParquetObjectWriter(sink, batches[0].schema, "snappy")
    for batch in batches:
        writer.write(batch)
    writer.close()
    sink.close()
    return sink, writer, stream.kept


def test_spark_sized_batches_become_one_row_group_not_one_each():
    # 30 batches of 1,000 rows (Spark hands mapInArrow 10,000-row batches by default)
    sink, writer, data = _write(_batches(30, 1000))
    parquet = pq.ParquetFile(io.BytesIO(data))
    assert parquet.metadata.num_row_groups == 1
    assert parquet.metadata.num_rows == writer.rows == 30_000
    assert pq.read_table(io.BytesIO(data)).column("id").to_pylist() == list(range(30_000))
    hasher = new_hasher("crc32c")
    hasher.update(data)
    assert (sink.size, sink.checksum) == (len(data), f"crc32c:{hasher.hexdigest()}")


def test_a_row_group_closes_once_its_arrow_data_reaches_the_limit(monkeypatch):
    batches = _batches(10, 1000)
    monkeypatch.setattr(object_files, "ROW_GROUP_BYTES", 3 * batches[0].nbytes)
    _, writer, data = _write(batches)
    parquet = pq.ParquetFile(io.BytesIO(data))
    assert [parquet.metadata.row_group(g).num_rows for g in range(parquet.metadata.num_row_groups)] == [
        3000,
        3000,
        3000,
        1000,
    ]
    assert writer.rows == 10_000


def test_empty_batches_add_no_row_group_and_an_object_of_none_still_reads():
    empty = [_batches(1, 1)[0].slice(0, 0)]  # Spark's schema, no rows
    _, writer, data = _write(empty + _batches(2, 1000) + empty)
    assert pq.ParquetFile(io.BytesIO(data)).metadata.num_row_groups == 1 and writer.rows == 2000
    _, writer, data = _write(empty)
    assert pq.read_table(io.BytesIO(data)).num_rows == 0 and writer.rows == 0


def test_a_writer_given_no_batch_stores_the_schema_alone():
    # what an output without rows gets (RecordWritten's empty object): readers still find the columns
    schema = _batches(1, 1)[0].schema
    stream = _Stream()
    sink = HashingSink(stream, "crc32c")
    ParquetObjectWriter(sink, schema, "snappy").close()
    sink.close()
    table = pq.read_table(io.BytesIO(stream.kept))
    assert table.num_rows == 0 and table.schema.names == ["id", "pad"] and sink.size == len(stream.kept)


@pytest.mark.parametrize("preset", [None, "when_supported"])
def test_the_sdk_checksum_is_asked_only_where_required_unless_the_environment_says(monkeypatch, preset):
    """pyarrow's client reads the setting once, when made; the process's environment is left as it was."""
    seen = []

    class Recording:
        def __init__(self, **kwargs):
            seen.append(os.environ.get(REQUEST_CHECKSUM_ENV))

    monkeypatch.setattr("pyarrow.fs.S3FileSystem", Recording)
    if preset is None:
        monkeypatch.delenv(REQUEST_CHECKSUM_ENV, raising=False)
    else:
        monkeypatch.setenv(REQUEST_CHECKSUM_ENV, preset)
    s3_filesystem({"endpoint": "http://127.0.0.1:9", "region": "us-east-1"})
    assert seen == [preset or "when_required"]
    assert os.environ.get(REQUEST_CHECKSUM_ENV) == preset
