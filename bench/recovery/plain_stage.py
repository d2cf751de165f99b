"""A stage of the recovery benchmark as users write it today: paths in, path out, no manifests.

    plain_stage.py <run dir> <stage> <input stage or -> <fail-once stage or -> <lose-before stage:lost stage or ->

Faults, for the benchmark only: the stage named by <fail-once> fails after its work on the first
execution of the run; <lose-before> deletes another stage's output before this stage reads it (once).
"""  # noqa: E501  (a drawing)

import shutil
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from work import source, step

run_dir, stage, upstream, fail_once, lose = (
    Path(sys.argv[1]),
    sys.argv[2],
    sys.argv[3],
    sys.argv[4],
    sys.argv[5],
)
marks = run_dir / "_faults"
marks.mkdir(parents=True, exist_ok=True)
if lose != "-" and lose.split(":")[0] == stage and not (marks / f"lost-{stage}").exists():
    (marks / f"lost-{stage}").touch()
    shutil.rmtree(run_dir / lose.split(":")[1], ignore_errors=True)
spark = SparkSession.builder.getOrCreate()
df = source(spark) if upstream == "-" else step(spark.read.parquet(str(run_dir / upstream)))
df.write.mode("overwrite").parquet(str(run_dir / stage))
spark.stop()
if fail_once == stage and not (marks / f"failed-{stage}").exists():
    (marks / f"failed-{stage}").touch()
    sys.exit(f"injected failure of {stage} after its work")
