"""One shard of sensor readings (argv: shard, shards): readings r = (i * 7919) % 1000 for ids i of the
shard, sensor i % 5. Handed to score_shard of the same shard through a pipelined partition."""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
shard, shards = int(sys.argv[1]), int(sys.argv[2])
readings = spark.range(shard, 300, shards).select(
    (F.col("id") % 5).alias("sensor"), ((F.col("id") * 7919) % 1000).alias("reading")
)
io.write("shard_readings", readings.withColumn("shard", F.lit(shard)))
spark.stop()
