"""Stage app: writes the deterministic orders of this map index's shard as output 'orders'."""

import os
import sys

from pyspark.sql import SparkSession

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from orders_data import orders  # noqa: E402

from airflow_ft_provider.spark import stage_io  # noqa: E402

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
shards = int(sys.argv[1]) if len(sys.argv) > 1 else 1
shard = io.map_index or 0
io.write("orders", spark.createDataFrame(orders(shard, shards)))
spark.stop()
