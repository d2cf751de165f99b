"""A source stage for the restart-strategy showcase: 50 rows (key, key * key)."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
io.write(
    "ingested",
    spark.range(0, 50).select(F.col("id").alias("key"), (F.col("id") * F.col("id")).alias("square")),
)
spark.stop()
