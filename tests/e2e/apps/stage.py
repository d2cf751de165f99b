"""Generic stage for the failover scenarios: a source generates rows, every other stage adds 1.

Source (no inputs): keys shard, shard+shards, ... < 40 with value = key * 10 (argv[1] = shards; ``keys=N``
for another bound than 40).
Other stages: the union of their inputs with value + 1, written to every declared output.
So a task at depth d of a chain outputs value = key * 10 + d: the tests know the right answer.
An argument ``sleep_on_try=T:S`` makes try T sleep S seconds before its Spark work (a window in which
a test can take the Spark Connect server away from a running stage); ``noise=1`` adds a random column,
so that every run of the stage writes different rows (tests/e2e/test_reuse.py). ``slow_write=S`` makes
each of the write's two Spark tasks take S seconds in the server (a long write a test can lose its worker
in), and ``ledger=DIR`` has each of them note "try:python worker:time" in DIR/<run id> when it is
computed.
"""

import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_ft_provider.spark import stage_io

spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
# The parent job a deployment with OpenLineage hands a spark-submit application (tests/e2e/test_lineage.py)
print("openlineage parent run:", spark.conf.get("spark.openlineage.parentRunId", "none"), flush=True)
options = dict(arg.split("=", 1) for arg in sys.argv[1:] if "=" in arg)
if "sleep_on_try" in options:
    on_try, seconds = options["sleep_on_try"].split(":")
    if io.spec.try_number == int(on_try):
        print(
            f"stage {io.spec.stage} try {io.spec.try_number}: sleeping {seconds} s before its Spark work",
            flush=True,
        )
        time.sleep(float(seconds))
if io.spec.inputs:
    frames = [io.read(name) for name in sorted(io.spec.inputs)]
    df = frames[0]
    for frame in frames[1:]:
        df = df.unionByName(frame)
    df = df.withColumn("value", F.col("value") + 1)
else:
    shards = int(sys.argv[1]) if len(sys.argv) > 1 and "=" not in sys.argv[1] else 1
    df = (
        spark.range(io.map_index or 0, int(options.get("keys", 40)), shards)
        .withColumnRenamed("id", "key")
        .withColumn("value", F.col("key") * 10)
    )
if "noise" in options:
    df = df.withColumn("noise", F.rand())
if "slow_write" in options:
    seconds, ledger, computed_by = float(options["slow_write"]), options.get("ledger"), io.spec.try_number
    ledger = ledger and f"{ledger}/{io.spec.run_id}"

    def slowly(batches):  # runs in the Spark server's Python workers: the standard library and pyarrow
        import os
        import time

        time.sleep(seconds)
        if ledger:
            os.makedirs(os.path.dirname(ledger) or ".", exist_ok=True)
            with open(ledger, "a") as out:
                out.write(f"{computed_by}:{os.getpid()}:{time.time():.3f}\n")  # try:worker:when done
        yield from batches

    df = df.repartition(2).mapInArrow(slowly, df.schema)
for name in io.spec.outputs:
    io.write(name, df)
spark.stop()
