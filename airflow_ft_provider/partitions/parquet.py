"""Parquet in and out of the store, with the codec recorded in the manifest.

The store commits any directory of files; this helper is for producers that hold a table in Python
(pyarrow Table, pandas DataFrame or a list of dicts). Spark writers produce their own files.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .manifest import Manifest, Producer
from .naming import PartitionRef

if TYPE_CHECKING:
    import pyarrow as pa

    from .store import S3PartitionStore

PARQUET_CODECS = ("snappy", "zstd", "none")
DEFAULT_CODEC = "snappy"


def check_parquet_codec(compression: str) -> str:
    if compression not in PARQUET_CODECS:
        raise ValueError(
            f"unsupported Parquet compression {compression!r}: use one of {list(PARQUET_CODECS)}"
        )
    return compression


def to_table(data: Any) -> pa.Table:
    """A pyarrow Table from a Table, a pandas DataFrame or a list of dicts (one dict per row)."""
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas without importing pandas
        return pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, Sequence) and all(isinstance(row, dict) for row in data):
        return pa.Table.from_pylist(list(data))
    raise TypeError(
        f"cannot write {type(data).__name__} as Parquet: pass a pyarrow.Table, a pandas.DataFrame or a "
        "list of dicts"
    )


def write_parquet(
    data: Any,
    directory: str | os.PathLike[str],
    *,
    compression: str = DEFAULT_CODEC,
    rows_per_file: int | None = None,
) -> tuple[list[Path], int]:
    """Write ``data`` as ``part-00000.parquet``… into ``directory``; returns (files, row count)."""
    import pyarrow.parquet as pq

    check_parquet_codec(compression)
    if rows_per_file is not None and (
        isinstance(rows_per_file, bool) or not isinstance(rows_per_file, int) or rows_per_file < 1
    ):
        raise ValueError(f"rows_per_file must be None or an integer ≥ 1, got {rows_per_file!r}")
    table = to_table(data)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    step = rows_per_file or max(table.num_rows, 1)
    files = []
    for n, start in enumerate(range(0, max(table.num_rows, 1), step)):
        path = out / f"part-{n:05d}.parquet"
        pq.write_table(table.slice(start, step), path, compression=compression)
        files.append(path)
    return files, table.num_rows


def read_parquet(paths: Iterable[str | os.PathLike[str]]) -> pa.Table:
    """One table from the files of a partition, in order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(p) for p in paths]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables)


def commit_table(
    store: S3PartitionStore,
    ref: PartitionRef,
    data: Any,
    *,
    producer: Producer,
    compression: str = DEFAULT_CODEC,
    rows_per_file: int | None = None,
) -> Manifest:
    """Write ``data`` as Parquet in a temporary directory and commit it as blocking partition ``ref``."""
    with tempfile.TemporaryDirectory(prefix="ft-partition-") as tmp:
        files, rows = write_parquet(data, tmp, compression=compression, rows_per_file=rows_per_file)
        return store.commit(
            ref, files, producer=producer, format="parquet", compression=compression, row_count=rows
        )


def read_table(store: S3PartitionStore, ref: PartitionRef) -> pa.Table:
    """Fetch a blocking partition (local cache first) and read it as one table."""
    if store.cache is not None:
        return read_parquet(store.fetch(ref).paths)
    with tempfile.TemporaryDirectory(prefix="ft-partition-") as tmp:
        return read_parquet(store.fetch(ref, tmp).paths).combine_chunks()
