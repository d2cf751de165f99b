"""A stage of the recovery benchmark run by SparkStageOperator (partitions through the store).

    ft_stage.py <marks dir> <fail-once stage or ->

The fault is the same as plain_stage.py's: the named stage fails after its work, on its first
execution in the run (the operator then commits nothing).
"""

import sys
from pathlib import Path

from pyspark.sql import SparkSession
from work import source, step

from airflow_ft_provider.spark import stage_io

marks, fail_once = Path(sys.argv[1]), sys.argv[2]
spark = SparkSession.builder.getOrCreate()
io = stage_io.for_session(spark)
df = step(io.read(next(iter(io.spec.inputs)))) if io.spec.inputs else source(spark)
for name in io.spec.outputs:
    io.write(name, df)
spark.stop()
if fail_once == io.spec.stage:
    marks.mkdir(parents=True, exist_ok=True)
    if not (marks / f"failed-{io.spec.stage}").exists():
        (marks / f"failed-{io.spec.stage}").touch()
        sys.exit(f"injected failure of {io.spec.stage} after its work")
