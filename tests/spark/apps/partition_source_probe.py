"""Writes or reads partition objects through the ft_partition source, in a local Spark whose tasks may
fail once (local[2,2]). Usage: partition_source_probe.py write|read ARGS_JSON; prints one JSON line."""

import json
import sys

from pyspark import TaskContext
from pyspark.sql import SparkSession

from airflow_ft_provider.spark.partition_source import PartitionSource, objects_option, parse_objects

mode, args = sys.argv[1], json.loads(sys.argv[2])
spark = SparkSession.builder.master("local[2,2]").config("spark.ui.enabled", "false").getOrCreate()
spark.dataSource.register(PartitionSource)
access = args.get("access", {})


def fail_once_in_partition_1(batches):
    """Every row goes to the writer; then task attempt 0 of Spark partition 1 fails, after its object's
    bytes reached S3 (a lost executor's half-finished task)."""
    yield from batches
    task = TaskContext.get()
    if task.partitionId() == 1 and task.attemptNumber() == 0:
        raise RuntimeError("task attempt 0 of partition 1 is lost after writing")


if mode == "write":
    frame = spark.range(0, args["rows"], numPartitions=4).selectExpr("id", "id * 2 AS doubled")
    frame = frame.mapInArrow(fail_once_in_partition_1, frame.schema)
    frame.write.format("ft_partition").mode("append").options(**access, target=args["target"]).save()
    print(json.dumps({"written": True}))
else:
    frame = (
        spark.read.format("ft_partition")
        .options(**access, files=objects_option(parse_objects(args["files"])))
        .load()
    )
    rows = frame.selectExpr("count(*) AS n", "count(DISTINCT id) AS ids", "sum(doubled) AS total").first()
    print(json.dumps({"rows": rows.n, "ids": rows.ids, "total": rows.total}))
