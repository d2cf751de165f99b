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


def test_the_executors_sums_are_the_exact_sums_of_the_hash_halves_and_drop_the_hash_column():
    #   batches of (id, _ft_row_hash) --RowHashSums.take--> batches of (id); high/low = sums of halves
    from airflow_ft_provider.spark.content import ROW_HASH_COLUMN, RowHashSums

    hashes = [[-1, 0, 1, -(2**63), 2**63 - 1], [123456789012345, -987654321]]
    sums = RowHashSums()
    for number, chunk in enumerate(hashes):
        # a data column may share the hash column's name: the hash is the last one, by place
        batch = pa.RecordBatch.from_arrays(
            [pa.array([number] * len(chunk)), pa.array(chunk, pa.int64())], names=[ROW_HASH_COLUMN] * 2
        )
        rest = sums.take(batch)
        assert rest.num_columns == 1 and rest.column(0).to_pylist() == [number] * len(chunk)
    bits = [h & (2**64 - 1) for chunk in hashes for h in chunk]  # Spark's LONG as unsigned bits
    assert sums.high == sum(b >> 32 for b in bits) and sums.low == sum(b & 0xFFFFFFFF for b in bits)


def test_sums_beyond_a_long_give_no_checksum_as_sparks_try_sum_does():
    from airflow_ft_provider.spark.content import RowHashSums, checksum_of

    sums = RowHashSums()
    batch = pa.RecordBatch.from_arrays([pa.array([-1] * 2**20, pa.int64())], names=["h"])
    for _ in range(2**11):  # 2^31 rows of 0xFFFFFFFF in each half: still a LONG
        sums.take(batch)
    assert sums.high == sums.low == 2**31 * 0xFFFFFFFF
    sums.take(batch)  # past 2^63 - 1
    assert sums.high is None and sums.low is None
    assert checksum_of("struct<id:bigint>", 2**31 + 2**20, sums.high, sums.low) is None
    assert checksum_of("struct<id:bigint>", 0, None, None) == checksum_of("struct<id:bigint>", 0, 0, 0)
