"""Stage app: reads 'orders' (whatever partitions this task was given), writes revenue per day."""

import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
if len(sys.argv) > 1:  # leave a trace that the application ran (tests assert it did not)
    open(os.path.join(sys.argv[1], f"ran-{io.spec.stage}"), "w").close()
revenue = io.read("orders").groupBy("day").agg(F.sum("amount").alias("revenue"), F.count("*").alias("orders"))
io.write(next(iter(io.spec.outputs)), revenue)  # the stage's single declared output
spark.stop()
