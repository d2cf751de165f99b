"""Aggregate the exchanged rows (every row is read)."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
rows = io.read("rows")
io.write(
    "summary",
    rows.groupBy((F.col("key") % 10).alias("bucket")).agg(
        F.count("*").alias("rows"), F.sum("value").alias("total"), F.max("payload").alias("last")
    ),
)
spark.stop()
