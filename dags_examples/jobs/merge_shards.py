"""Sum the per-shard scores per sensor."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
scores = io.read("shard_scores")
totals = scores.groupBy("sensor").agg(
    F.sum("alerts").alias("alerts"), F.sum("total").alias("total"), F.countDistinct("shard").alias("shards")
)
io.write("sensor_totals", totals.orderBy("sensor"))
spark.stop()
