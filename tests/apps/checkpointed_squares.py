"""The checkpointed stage of tests/unit/stage_try/test_checkpointed.py as a PySpark file (spark-submit)."""

from pyspark.sql import SparkSession

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
io.write_stream("squares", io.read_stream("numbers").selectExpr("id", "id * id AS sq"))
