"""What a stage wrote: an order-independent checksum of its rows, computed by Spark during the write
itself, and the rows of local Parquet output counted from the files' footers.

It lets a re-run consumer see that its inputs did not change (``partitions/provenance.py``). Spark writes
unordered, partitioned output, so the files' bytes cannot tell; the checksum is over rows: the sum of
each row's 64-bit xxHash (of its columns, in column order), kept as two exact sums of 32-bit halves, with
the row count and the schema. The sums are the write's observed metrics (``DataFrame.observe``): no extra
Spark job, on Spark Connect as under spark-submit. (A partition of more than 2^31 rows overflows a sum:
it gets no checksum, and is never reused.)

Only columns Spark hashes the same for equal values are checksummed: Spark refuses to hash maps (equal
maps may hash differently), and floating-point values are hashed as they are (0.0 and -0.0 differ,
which can only cost a re-run). An output with any other type gets no checksum, and is never reused.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CONTENT_VERSION = "rows1"  # the scheme's name in the manifest: a new scheme never matches an old one


def _hashable(data_type: Any) -> bool:
    """Whether Spark hashes equal values of ``data_type`` equally (maps, variants and others: no)."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.ArrayType):
        return _hashable(data_type.elementType)
    if isinstance(data_type, T.StructType):
        return all(_hashable(f.dataType) for f in data_type.fields)
    atomic = (
        T.BooleanType,
        T.ByteType,
        T.ShortType,
        T.IntegerType,
        T.LongType,
        T.FloatType,
        T.DoubleType,
        T.DecimalType,
        T.StringType,
        T.BinaryType,
        T.DateType,
        T.TimestampType,
        T.TimestampNTZType,
    )
    return isinstance(data_type, atomic)


class ContentObserver:
    """Wraps the DataFrame to write (``observed``); after the write, ``checksum`` says what it held."""

    def __init__(self, df: DataFrame) -> None:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        schema = df.schema
        self.schema = schema.simpleString()
        self.observation: Any = None
        self.observed = df
        if not schema.fields or not _hashable(schema):
            return
        row_hash = F.xxhash64(*[df[name] for name in df.columns])
        self.observation = Observation(f"ft_content_{uuid.uuid4().hex}")
        self.observed = df.observe(
            self.observation,
            F.count(F.lit(1)).alias("rows"),
            F.try_sum(F.shiftrightunsigned(row_hash, 32)).alias("high"),  # try_: null, not an error,
            F.try_sum(row_hash.bitwiseAND(F.lit(0xFFFFFFFF))).alias("low"),  # on overflow
        )

    def checksum(self, rows: int) -> str | None:
        """``rows1:<32 hex>`` of what was written, or None: not computed, a sum overflowed, or Spark's
        observed count is not ``rows`` (counted from the files), so the sums cannot be trusted."""
        if self.observation is None:
            return None
        metrics = self.observation.get
        high, low = metrics["high"], metrics["low"]
        if int(metrics["rows"]) != rows or rows and (high is None or low is None):
            return None
        text = f"{self.schema}|{rows}|{high or 0}|{low or 0}"
        return f"{CONTENT_VERSION}:{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def rows_in_footers(location: str) -> int | None:
    """The rows of the Parquet files under a local output location, read from their footers in this
    process (a Spark job costs about a second for the many small files of a stream's micro-batches);
    None where they cannot be read here (not a local path, no pyarrow, a file pyarrow cannot open)."""
    root = location.removeprefix("file://")
    if not location.startswith("file://") or not os.path.isdir(root):  # elsewhere: not on this disk
        return None
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None
    total = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]  # as Spark's reader skips them
        for name in names:
            if name.startswith(("_", ".")):
                continue
            try:
                total += pq.ParquetFile(os.path.join(folder, name)).metadata.num_rows
            except Exception:  # noqa: BLE001 - Spark will say what is wrong with it
                return None
    return total
