"""Orders and revenue per day."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
orders = io.read("enriched_orders")
revenue = orders.groupBy("day").agg(F.count("*").alias("orders"), F.sum("total_cents").alias("revenue_cents"))
io.write("daily_revenue", revenue.orderBy("day"))
spark.stop()
