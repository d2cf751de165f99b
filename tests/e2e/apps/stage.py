"""Generic stage for the failover scenarios: a source generates rows, every other stage adds 1.

Source (no inputs): keys shard, shard+shards, ... < 40 with value = key * 10 (argv[1] = shards).
Other stages: the union of their inputs with value + 1, written to every declared output.
So a task at depth d of a chain outputs value = key * 10 + d: the tests know the right answer.
"""

import sys

from pyspark.sql import SparkSession, functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
if io.spec.inputs:
    frames = [io.read(name) for name in sorted(io.spec.inputs)]
    df = frames[0]
    for frame in frames[1:]:
        df = df.unionByName(frame)
    df = df.withColumn("value", F.col("value") + 1)
else:
    shards = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    df = spark.range(io.map_index or 0, 40, shards).withColumnRenamed("id", "key").withColumn("value", F.col("key") * 10)
for name in io.spec.outputs:
    io.write(name, df)
spark.stop()
