"""Add amount, 8 % tax (truncated to whole cents), total and a size class."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
orders = io.read("cleaned_orders").withColumn("amount_cents", F.col("quantity") * F.col("unit_price_cents"))
orders = orders.withColumn("tax_cents", (F.col("amount_cents") * 8 / 100).cast("long"))
orders = orders.withColumn("total_cents", F.col("amount_cents") + F.col("tax_cents"))
orders = orders.withColumn("size", F.when(F.col("total_cents") >= 5000, "large").otherwise("small"))
io.write("enriched_orders", orders)
spark.stop()
