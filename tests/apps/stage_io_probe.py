"""A PySpark application exercising stage_io; prints one RESULT line per check for the test to read."""

import tempfile

from pyspark.sql import SparkSession

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.appName("stage_io_probe").getOrCreate()
io = stage_io.for_session(spark)
orders = io.read("orders")
print("RESULT rows_in", orders.count())
print("RESULT map_index", io.map_index)
totals = orders.groupBy("customer").sum("amount").withColumnRenamed("sum(amount)", "total")
tracker = spark.sparkContext.statusTracker()
spark.sparkContext.setJobGroup("stage_io_write", "io.write")
io.write("totals", totals)
spark.sparkContext.setJobGroup("plain_write", "the same write without stage_io")
totals.write.parquet(tempfile.mkdtemp(prefix="plain-write-") + "/totals")
spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
print("RESULT write_jobs", len(tracker.getJobIdsForGroup("stage_io_write")))
print("RESULT plain_write_jobs", len(tracker.getJobIdsForGroup("plain_write")))
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
