"""A PySpark application exercising stage_io; prints one RESULT line per check for the test to read."""

from pyspark.sql import SparkSession

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.appName("stage_io_probe").getOrCreate()
io = stage_io.for_session(spark)
orders = io.read("orders")
print("RESULT rows_in", orders.count())
print("RESULT map_index", io.map_index)
totals = orders.groupBy("customer").sum("amount").withColumnRenamed("sum(amount)", "total")
io.write("totals", totals)
for attempt, action in (
    ("undeclared", lambda: io.read("customers")),
    ("twice", lambda: io.write("totals", totals)),
):
    try:
        action()
        print("RESULT", attempt, "no-error")
    except stage_io.StageIOError as err:
        print("RESULT", attempt, "StageIOError:", err)
spark.stop()
