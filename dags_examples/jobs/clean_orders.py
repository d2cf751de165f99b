"""Drop duplicates, cancelled orders and orders without items."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
orders = io.read("raw_orders").dropDuplicates(["order_id"])
io.write("cleaned_orders", orders.filter((F.col("status") != "cancelled") & (F.col("quantity") > 0)))
spark.stop()
