"""The stateful aggregation of tests/unit/stage_try/test_checkpointed_state.py as a PySpark file
(spark-submit): its RocksDB state lives in the driver this time, not in a Connect server."""

import os
import sys

from pyspark.sql import SparkSession

from airflow_ft_provider.spark import stage_io

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpointed import totals  # noqa: E402 - beside this file, as a --py-files module would be

spark = SparkSession.builder.getOrCreate()
totals(spark, stage_io.for_session(spark))
