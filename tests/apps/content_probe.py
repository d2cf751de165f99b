"""Writes rows through ContentObserver in several arrangements and prints each checksum:
``RESULT <case> <checksum or None>`` (tests/unit/spark/test_stage_io.py)."""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark.content import ContentObserver

spark = SparkSession.builder.getOrCreate()
out = sys.argv[1]
base = spark.range(0, 1000).selectExpr(
    "id", "CAST(id % 13 AS STRING) AS s", "array(id, id + 1) AS a", "named_struct('x', id / 3) AS st"
)
cases = {
    "one_file": base.repartition(1),
    "shuffled": base.repartition(7).orderBy(F.rand(seed=3)),
    "one_value_changed": base.withColumn("s", F.when(F.col("id") == 500, "x").otherwise(F.col("s"))),
    "a_row_duplicated": base.union(base.limit(1)),
    "a_column_renamed": base.withColumnRenamed("s", "t"),
    "with_a_map": base.withColumn("m", F.create_map(F.lit("k"), F.col("id"))),
    "empty": base.limit(0),
}
for name, df in cases.items():
    observer = ContentObserver(df)
    observer.observed.write.parquet(f"{out}/{name}")
    print("RESULT", name, observer.checksum(spark.read.parquet(f"{out}/{name}").count()), flush=True)
spark.stop()
