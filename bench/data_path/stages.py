"""The three stages of bench/bench_data_path.py (Spark Connect callables ``fn(spark, io)``), and a stand-in
``io`` that reads and writes Parquet on the Spark side's local disk: the same Spark jobs, without the
partition store (the limit on this machine)."""

from __future__ import annotations

ROWS = 20_000_000


def generate(spark, io):
    """~75 bytes a row that Parquet cannot compress away (a SHA-256 in hex)."""
    partitions = max(8, ROWS // 250_000)  # objects of ~17 MB, whatever the size
    frame = spark.range(0, ROWS, numPartitions=partitions).selectExpr(
        "id", "id % 1000 AS k", "sha2(cast(id AS STRING), 256) AS pad"
    )
    io.write("generated", frame)


def enrich(spark, io):
    io.write("enriched", io.read("generated").selectExpr("id", "k", "id * 2 AS doubled", "pad"))


def summarize(spark, io):
    # Every row's bytes are read (the pad's length); the output is small
    totals = io.read("enriched").groupBy("k").agg({"doubled": "sum", "pad": "max"}).toDF("k", "total", "pad")
    io.write("summary", totals)


class LocalDiskIO:
    """``read``/``write`` of Parquet under ``root`` (a local directory the Spark side sees)."""

    def __init__(self, spark, root: str) -> None:
        self.spark, self.root = spark, root.rstrip("/")

    def read(self, name):
        return self.spark.read.parquet(f"{self.root}/{name}")

    def write(self, name, frame):
        frame.write.mode("overwrite").parquet(f"{self.root}/{name}")
