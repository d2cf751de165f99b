"""The stages of tests/unit/execution/test_placement_executors.py: a PySpark file (spark-submit, ``argv``: the
stage) and the same stages as callables (Spark Connect)."""

import sys

ROWS = 120_000


def numbers(spark, io):
    # 64 hex characters a row that Parquet cannot compress away: the data dwarfs the manifests
    io.write(
        "numbers",
        spark.range(0, ROWS, numPartitions=4).selectExpr(
            "id", "id % 7 AS k", "sha2(cast(id AS STRING), 256) AS pad"
        ),
    )


def doubled(spark, io):
    io.write("doubled", io.read("numbers").selectExpr("id", "k", "id * 2 AS doubled", "pad"))


def totals(spark, io):
    io.write(
        "totals",
        io.read("doubled").groupBy("k").agg({"doubled": "sum", "*": "count"}).toDF("k", "total", "n"),
    )


def squares(spark, io):
    """A checkpointed stage: the same rows, micro-batch by micro-batch."""
    io.write_stream("squares", io.read_stream("numbers").selectExpr("id", "id * id AS sq", "pad"))


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    from airflow_ft_provider.spark import stage_io

    session = SparkSession.builder.getOrCreate()
    {"numbers": numbers, "doubled": doubled, "totals": totals}[sys.argv[1]](
        session, stage_io.for_session(session)
    )
    session.stop()
