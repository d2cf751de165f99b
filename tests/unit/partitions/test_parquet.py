"""Parquet helpers: the codec is configurable, written into the files and recorded in the manifest."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_ft_provider.partitions import Producer, commit_table, read_parquet, read_table, write_parquet

ROWS = [{"id": i, "name": f"n{i}", "amount": i * 1.5} for i in range(10)]


@pytest.mark.parametrize(
    "codec, parquet_name", [("snappy", "SNAPPY"), ("zstd", "ZSTD"), ("none", "UNCOMPRESSED")]
)
def test_codec_reaches_the_files(tmp_path, codec, parquet_name):
    files, rows = write_parquet(ROWS, tmp_path, compression=codec, rows_per_file=4)
    assert [f.name for f in files] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert rows == 10
    assert {pq.ParquetFile(f).metadata.row_group(0).column(0).compression for f in files} == {parquet_name}
    assert read_parquet(files).to_pylist() == ROWS


@pytest.mark.parametrize(
    "data", [ROWS, pa.Table.from_pylist(ROWS), pd.DataFrame(ROWS)], ids=["dicts", "arrow", "pandas"]
)
def test_inputs(tmp_path, data):
    files, rows = write_parquet(data, tmp_path)
    assert rows == 10 and read_parquet(files).to_pylist() == ROWS


def test_bad_codec_and_input_are_clear_errors(tmp_path):
    with pytest.raises(
        ValueError, match="unsupported Parquet compression 'lzo': use one of \\['snappy', 'zstd', 'none'\\]"
    ):
        write_parquet(ROWS, tmp_path, compression="lzo")
    with pytest.raises(TypeError, match="cannot write str as Parquet"):
        write_parquet("nope", tmp_path)
    with pytest.raises(ValueError, match="rows_per_file"):
        write_parquet(ROWS, tmp_path, rows_per_file=0)


@pytest.mark.s3
def test_commit_and_read_a_table_through_the_store(store, ref):
    manifest = commit_table(
        store, ref, ROWS, producer=Producer("p", 0, 1), compression="zstd", rows_per_file=3
    )
    assert (manifest.format, manifest.compression, manifest.row_count, len(manifest.files)) == (
        "parquet",
        "zstd",
        10,
        4,
    )
    assert read_table(store, ref).to_pylist() == ROWS
