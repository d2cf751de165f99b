"""A stage on the staged path (batch or checkpointed) counts its output rows from the Parquet footers, in
its own process: the files Spark would read (hidden and '_' names skipped), no Spark job."""

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_ft_provider.spark.content import rows_in_footers as _rows_in_footers


def test_rows_come_from_the_footers_of_the_files_spark_would_read(tmp_path):
    for batch, rows in (("b0000000000", 3), ("b0000000001", 5)):
        (tmp_path / batch).mkdir()
        pq.write_table(pa.table({"id": list(range(rows))}), tmp_path / batch / "part-00000.snappy.parquet")
        (tmp_path / batch / "_SUCCESS").write_bytes(b"")
        (tmp_path / batch / ".part-00000.snappy.parquet.crc").write_bytes(b"crc")
    (tmp_path / "_spark_metadata").mkdir()
    pq.write_table(pa.table({"id": [1] * 100}), tmp_path / "_spark_metadata" / "0.parquet")  # not output
    assert _rows_in_footers(tmp_path.as_uri()) == 8


def test_where_footers_cannot_be_read_here_spark_counts(tmp_path):
    assert _rows_in_footers("s3a://bucket/prefix/attempt/") is None
    assert _rows_in_footers((tmp_path / "on-the-spark-host-only").as_uri()) is None  # not 0 rows
    (tmp_path / "part-00000.parquet").write_bytes(b"not parquet")
    assert _rows_in_footers(tmp_path.as_uri()) is None
