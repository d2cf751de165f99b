"""What a stage wrote: an order-independent checksum of its rows, computed by Spark during the write
itself, and the rows of local Parquet output counted from the files' footers.

It lets a re-run consumer see that its inputs did not change (``partitions/provenance.py``). Spark writes
unordered, partitioned output, so the files' bytes cannot tell; the checksum is over rows: the sum of
each row's 64-bit xxHash (of its columns, in column order), kept as two exact sums of 32-bit halves, with
the row count and the schema. (A partition whose sums exceed a 64-bit integer, more than 2^31 rows, gets
no checksum, and is never reused.)

Two ways compute the same sums. Spark's own writer (the staged path) observes them
(``ContentObserver``: ``DataFrame.observe``, no extra Spark job, on Spark Connect as under
spark-submit). The executors' writer (``partition_objects.py``) gets each row's hash as one more
column of the Arrow batches it writes anyway, and sums the halves there (``RowHashSums``), vectorized:
Spark's observation updates its aggregation row by row outside whole-stage code generation, which cost
+13.7 % of the CPU of a 2 M-row write, where the extra column costs +4.6 % (``bench/bench_row_checksum.py``).

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
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

CONTENT_VERSION = "rows1"  # the scheme's name in the manifest: a new scheme never matches an old one
ROW_HASH_COLUMN = "_ft_row_hash"  # the executors' writer's extra last column: summed, never written
_MAX_SUM = (1 << 63) - 1  # Spark's try_sum over LONG gives null beyond it; the sums here do the same
_MAX_BATCH_ROWS = 1 << 32  # an Arrow batch's uint64 sum of 32-bit halves cannot wrap below it


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


def row_hash(df: DataFrame) -> Column | None:
    """Each row's 64-bit hash, the checksum's summand; None where ``df``'s rows get no checksum."""
    from pyspark.sql import functions as F

    schema = df.schema
    if not schema.fields or not _hashable(schema):
        return None
    return F.xxhash64(*[df[name] for name in df.columns])


def as_long(total: int) -> int | None:
    """``total`` where a LONG holds it, else None: what Spark's ``try_sum`` gives past it."""
    return total if total <= _MAX_SUM else None


def checksum_of(schema: str, rows: int, high: int | None, low: int | None) -> str | None:
    """``rows1:<32 hex>`` of ``rows`` rows of ``schema`` (``simpleString``) whose row hashes' halves sum
    to ``high`` and ``low``; None when a sum is missing (not computed, or it overflowed)."""
    if rows and (high is None or low is None):
        return None
    text = f"{schema}|{rows}|{high or 0}|{low or 0}"
    return f"{CONTENT_VERSION}:{hashlib.sha256(text.encode()).hexdigest()[:32]}"


class RowHashSums:
    """The executors' side: sums the row hashes of the Arrow batches a write receives (their last
    column, ``ROW_HASH_COLUMN``) and hands on each batch without it. ``high``/``low`` are None once a
    sum is beyond a 64-bit integer, as Spark's ``try_sum`` is (``ContentObserver``)."""

    def __init__(self) -> None:
        self._high = 0
        self._low = 0

    def take(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        import pyarrow as pa
        import pyarrow.compute as pc

        if batch.num_rows >= _MAX_BATCH_ROWS:
            raise ValueError(f"an Arrow batch of {batch.num_rows} rows is more than a row sum can take")
        hashes = batch.column(batch.num_columns - 1).view(pa.uint64())  # the bits of Spark's LONG
        self._high += pc.sum(pc.shift_right(hashes, pa.scalar(32, pa.uint64()))).as_py() or 0
        self._low += pc.sum(pc.bit_wise_and(hashes, pa.scalar(0xFFFFFFFF, pa.uint64()))).as_py() or 0
        return batch.select(range(batch.num_columns - 1))  # by place: a column may share its name

    @property
    def high(self) -> int | None:
        return as_long(self._high)

    @property
    def low(self) -> int | None:
        return as_long(self._low)


class ContentObserver:
    """Wraps the DataFrame to write (``observed``); after the write, ``checksum`` says what it held."""

    def __init__(self, df: DataFrame) -> None:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        self.schema = df.schema.simpleString()
        self.observation: Any = None
        self.observed = df
        hashed = row_hash(df)
        if hashed is None:
            return
        self.observation = Observation(f"ft_content_{uuid.uuid4().hex}")
        self.observed = df.observe(
            self.observation,
            F.count(F.lit(1)).alias("rows"),
            F.try_sum(F.shiftrightunsigned(hashed, 32)).alias("high"),  # try_: null, not an error,
            F.try_sum(hashed.bitwiseAND(F.lit(0xFFFFFFFF))).alias("low"),  # on overflow
        )

    def checksum(self, rows: int) -> str | None:
        """``rows1:<32 hex>`` of what was written, or None: not computed, a sum overflowed, or Spark's
        observed count is not ``rows`` (counted from the files), so the sums cannot be trusted."""
        if self.observation is None:
            return None
        metrics = self.observation.get
        if int(metrics["rows"]) != rows:
            return None
        return checksum_of(self.schema, rows, metrics["high"], metrics["low"])


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
