"""One shard of sensor readings (argv: shard, shards): readings r = (i * 7919) % 1000 for ids i of the
shard; per sensor (i % 5) the count of readings above 100 and their sum."""

import sys

from pyspark.sql import SparkSession, functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
shard, shards = int(sys.argv[1]), int(sys.argv[2])
readings = spark.range(shard, 300, shards).select(
    (F.col("id") % 5).alias("sensor"), ((F.col("id") * 7919) % 1000).alias("reading"))
scores = readings.filter(F.col("reading") > 100).groupBy("sensor").agg(
    F.count("*").alias("alerts"), F.sum("reading").alias("total"))
io.write("shard_scores", scores.withColumn("shard", F.lit(shard)))
spark.stop()
