"""Source stage: 240 synthetic orders plus 12 duplicated rows, deterministic (no randomness, no clock).

order_id i: customer i % 13, day 2026-01-01 + (i % 7), quantity i % 4 (0 = invalid), unit price
500 + (i * 37) % 2000 cents, status 'cancelled' when i % 11 == 0 else 'complete'.
"""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
ids = spark.range(0, 240).withColumnRenamed("id", "order_id")
orders = ids.select(
    "order_id",
    (F.col("order_id") % 13).alias("customer_id"),
    F.date_format(
        F.date_add(F.lit("2026-01-01").cast("date"), (F.col("order_id") % 7).cast("int")), "yyyy-MM-dd"
    ).alias("day"),
    (F.col("order_id") % 4).alias("quantity"),
    (F.lit(500) + (F.col("order_id") * 37) % 2000).alias("unit_price_cents"),
    F.when(F.col("order_id") % 11 == 0, "cancelled").otherwise("complete").alias("status"),
)
orders = orders.unionByName(orders.filter(F.col("order_id") % 20 == 0))  # an at-least-once source
io.write("raw_orders", orders)
spark.stop()
