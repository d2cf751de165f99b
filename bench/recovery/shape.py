"""The recovery benchmark's pipeline shape and settings, shared by its two DAG files: dags.py (the
comparisons: SparkSubmitOperator) and ft_dags.py (this provider's pipelines). Kept apart so that a
pipeline's task processes parse a file that imports only the provider, as a user's would: parsing the
comparisons' file imports the Spark provider's operator and its lineage code, 0.3-0.5 CPU-s per task
process forked from a scheduler that has not loaded them.
"""

import os
from datetime import datetime
from pathlib import Path

HERE = Path(os.environ.get("FT_BENCH_RECOVERY_APPS", Path(__file__).resolve().parent))
DATA = os.environ.get("FT_BENCH_RECOVERY_DATA", "/tmp/ft-bench-recovery")
BRANCHES, DEPTH = 4, 3
SPARK = {
    "conf": {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "1g",
    },
    "py_files": str(HERE / "work.py"),
}
# Two stages at a time on the 2-core machine, for every variant alike.
COMMON = {
    "schedule": None,
    "start_date": datetime(2026, 1, 1),
    "catchup": False,
    "max_active_tasks": 2,
    "tags": ["ft-bench"],
}
RUN_DIR = DATA + "/{{ dag.dag_id }}/{{ run_id }}"
FAIL_ONCE = "{{ dag_run.conf.get('fail_once', '-') }}"
LOSE = "{{ dag_run.conf.get('lose', '-') }}"


def stages():
    """(stage, upstream stage or None) in dependency order."""
    yield "extract", None
    for branch in range(1, BRANCHES + 1):
        for level in range(1, DEPTH + 1):
            yield f"b{branch}_s{level}", "extract" if level == 1 else f"b{branch}_s{level - 1}"
