"""Stage app that writes part of its output and then fails, as a buggy job would."""

from pyspark.sql import SparkSession

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
io.write("first", spark.range(10))
raise RuntimeError("injected failure after writing 'first'")
