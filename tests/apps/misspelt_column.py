"""Stage app with a code bug: it selects a column that does not exist (Spark: UNRESOLVED_COLUMN)."""

from pyspark.sql import SparkSession

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
io.write(next(iter(io.spec.outputs)), spark.range(3).select("idd"))
