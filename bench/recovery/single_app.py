"""The whole recovery-benchmark pipeline as one Spark application (retried as a unit by Airflow).

    single_app.py <run dir> <fail-once stage or ->

Stages run in dependency order in one SparkSession; intermediates are cached, the final outputs
written. The fault fails the application after the named stage's work, on the first execution only.
"""

import sys
from pathlib import Path

from pyspark.sql import SparkSession
from work import source, step

BRANCHES, DEPTH = 4, 3
run_dir, fail_once = Path(sys.argv[1]), sys.argv[2]
(run_dir / "_faults").mkdir(parents=True, exist_ok=True)
spark = SparkSession.builder.getOrCreate()
extract = source(spark).cache()
extract.count()
for branch in range(1, BRANCHES + 1):
    df = extract
    for level in range(1, DEPTH + 1):
        name = f"b{branch}_s{level}"
        df = step(df).cache()
        df.count()  # each stage's work happens here, in order
        if name == fail_once and not (run_dir / "_faults" / f"failed-{name}").exists():
            (run_dir / "_faults" / f"failed-{name}").touch()
            sys.exit(f"injected failure of {name} after its work")
    df.write.mode("overwrite").parquet(str(run_dir / f"b{branch}_s{DEPTH}"))
spark.stop()
