"""Per customer: number of orders, money spent, large orders, first and last order day."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
orders = io.read("enriched_orders")
customers = orders.groupBy("customer_id").agg(
    F.count("*").alias("orders"),
    F.sum("total_cents").alias("spent_cents"),
    F.sum(F.when(F.col("size") == "large", 1).otherwise(0)).alias("large_orders"),
    F.min("day").alias("first_day"),
    F.max("day").alias("last_day"),
)
io.write("customer_aggregates", customers.orderBy("customer_id"))
spark.stop()
