"""Writes rows through ContentObserver in several arrangements and prints each checksum:
``RESULT <case> <checksum or None>`` (tests/unit/spark/test_stage_io.py). Given a second argument (JSON:
an ``s3://`` target and the store's access options), writes each case the executors' way too
(``write_objects``, credentials from the environment) and prints ``EXECUTORS <case> <checksum or None>``
(tests/unit/spark/test_partition_objects.py)."""

import json
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark.content import ContentObserver
from airflow_ft_provider.spark.partition_objects import write_objects

spark = SparkSession.builder.getOrCreate()
out = sys.argv[1]
executors = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
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
    if executors is not None:
        written = write_objects(df, f"{executors['target']}{name}/", executors["access"])
        print("EXECUTORS", name, written.content, written.rows, flush=True)
spark.stop()
