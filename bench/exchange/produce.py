"""3 million rows whose payload Parquet cannot compress much (~150 MB as snappy Parquet)."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

ROWS = 3_000_000

spark = SparkSession.builder.getOrCreate()
rows = (
    spark.range(ROWS)
    .withColumnRenamed("id", "key")
    .withColumn("value", F.rand(seed=7) * 1000)
    .withColumn("payload", F.substring(F.sha2(F.col("key").cast("string"), 256), 1, 32))
)
stage_io.for_session(spark).write("rows", rows.repartition(2))
spark.stop()
