"""Stage app that refuses its input with its own exception type (listed as not recoverable by the
stage: only the driver's failure report tells the operator that type)."""

from pyspark.sql import SparkSession

from airflow_ft_provider.spark import stage_io


class BadRecord(ValueError):
    pass


spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
raise BadRecord("order 17 has a negative amount")
