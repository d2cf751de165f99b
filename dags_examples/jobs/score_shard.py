"""Score one shard's readings: per sensor, the count of readings above 100 and their sum."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
readings = io.read("shard_readings")
scores = (
    readings.filter(F.col("reading") > 100)
    .groupBy("sensor", "shard")
    .agg(F.count("*").alias("alerts"), F.sum("reading").alias("total"))
)
io.write("shard_scores", scores)
spark.stop()
