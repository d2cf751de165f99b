"""A stage with no work to speak of: one row out."""

from pyspark.sql import SparkSession

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
stage_io.for_session(spark).write("one_row", spark.range(1))
spark.stop()
