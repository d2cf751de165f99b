"""The work of one stage of the recovery benchmark, shared by every way of running the pipeline.

A source stage generates ROWS rows; every other stage joins its input with a small dimension,
aggregates and re-expands it, so each stage does a few seconds of real Spark work and the data of a
stage at depth d is a deterministic function of d (outputs can be compared across alternatives).
"""

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

ROWS = 400_000


def source(spark: SparkSession) -> DataFrame:
    return (
        spark.range(ROWS)
        .withColumnRenamed("id", "key")
        .withColumn("value", (F.col("key") * 7919) % 100_003)
        .withColumn("depth", F.lit(0))
    )


def step(df: DataFrame) -> DataFrame:
    spark = df.sparkSession
    dim = spark.range(97).withColumnRenamed("id", "bucket").withColumn("weight", F.col("bucket") % 13 + 1)
    joined = df.withColumn("bucket", F.col("key") % 97).join(F.broadcast(dim), "bucket")
    stats = joined.groupBy("bucket").agg(F.sum("value").alias("total"))
    return joined.join(F.broadcast(stats), "bucket").select(
        "key",
        ((F.col("value") * F.col("weight") + F.col("total")) % 100_003).alias("value"),
        (F.col("depth") + 1).alias("depth"),
    )
