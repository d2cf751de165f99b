"""Writes partition objects as the executors do (``write_objects``), or reads them (``read_objects``),
in a local Spark whose tasks may fail once (local[2,2]), or on the cluster ``master`` given (mode
``slow_write``: each Spark task's batches take a while and are noted in ``ledger``, so that a test can
kill its executor mid-write).
Usage: partition_objects_probe.py write|slow_write|read ARGS_JSON; prints one JSON line."""

import json
import sys

from pyspark import TaskContext
from pyspark.sql import SparkSession

from airflow_ft_provider.spark.partition_objects import WriteObjects, read_objects, write_objects
from airflow_ft_provider.spark.spec import StoreCredentials, StoredObject

mode, args = sys.argv[1], json.loads(sys.argv[2])
spark = (
    SparkSession.builder.master(args.get("master", "local[2,2]"))
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
if "runtime_zip" in args:  # a cluster's executors import the source from the stage's runtime zip
    spark.sparkContext.addPyFile(args["runtime_zip"])
given = args.get("credentials")
access = args.get("access", {})


class LostAfterWriting(WriteObjects):
    """Task attempt 0 of Spark partition 1 fails once its object is complete in S3, before Spark hears
    of it (an executor lost at that moment; a speculative duplicate's object is the same case)."""

    def __call__(self, batches):
        written = list(super().__call__(batches))
        task = TaskContext.get()
        if task.partitionId() == 1 and task.attemptNumber() == 0:
            raise RuntimeError("task attempt 0 of partition 1 is lost after writing")
        yield from written


if mode == "write":
    frame = spark.range(0, args["rows"], numPartitions=4).selectExpr("id", "id * 2 AS doubled")
    written = write_objects(frame, args["target"], access, task_writer=LostAfterWriting)
    print(json.dumps({"written": written.rows}))
elif mode == "slow_write":
    ledger, pause = args["ledger"], args["seconds_per_batch"]

    def noted(batches):  # runs in the executors' Python workers
        import time

        from pyspark import TaskContext

        task = TaskContext.get()
        for batch in batches:
            time.sleep(pause)
            with open(ledger, "a") as out:
                out.write(f"{task.partitionId()} {task.attemptNumber()} {batch.num_rows}\n")
            yield batch

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(args["rows_per_batch"]))
    frame = spark.range(0, args["rows"], numPartitions=4).selectExpr("id", "id * 2 AS doubled")
    frame = frame.mapInArrow(noted, frame.schema)
    written = write_objects(frame, args["target"], access, StoreCredentials(**given) if given else None)
    print(json.dumps({"written": written.rows}))
else:
    objects = [StoredObject(e["key"], e["size"], e["checksum"]) for e in json.loads(args["files"])]
    frame = read_objects(spark, objects, access, StoreCredentials(**given) if given else None)
    rows = frame.selectExpr("count(*) AS n", "count(DISTINCT id) AS ids", "sum(doubled) AS total").first()
    print(json.dumps({"rows": rows.n, "ids": rows.ids, "total": rows.total}))
