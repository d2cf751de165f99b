"""The pipeline of bench/bench_running_work.py (issue 31), on the reference deployment.

``ft_bench_running_write``: one stage W without inputs whose write takes WRITE_SECONDS in the Spark
Connect server (two Spark tasks side by side), each Spark task noting in LEDGERS/<run id> which try
computed it. It runs tests/e2e/apps/stage.py.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

WRITE_SECONDS = 60
LEDGERS = "/tmp/ft-bench-ledgers"
APP = str(
    Path(os.environ.get("FT_E2E_APPS", Path(__file__).resolve().parents[2] / "tests" / "e2e" / "apps"))
    / "stage.py"
)

with DAG("ft_bench_running_write", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    with FailoverPipeline(
        restart_strategy={
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "1 s",
        }
    ):
        SparkStageOperator(
            task_id="W",
            application=APP,
            conf={"spark.sql.shuffle.partitions": "1"},
            outputs=["w"],
            application_args=[f"slow_write={WRITE_SECONDS}", f"ledger={LEDGERS}"],
        )
