"""Losing the Spark Connect server (tests/e2e/test_spark_connect_server_loss.py).

Stages run on connection ``spark_connect_loss``, a server of the test's own that it kills and restarts.
``gate`` (a plain task, not a stage) holds T2 back until the test says go, so that the first loss falls
between T1 publishing its pipelined partition and T2 reading it; T2's second try sleeps before its
Spark work, so that the second loss falls while T2 runs.

    S --s--> [ T1 ~~t1 (pipelined, a view in the server)~~> T2 ] --t2--> U
                   \\--> gate --/
"""

import os
import time
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, task
from ft_e2e_common import run_dir

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

APP = str(Path(os.environ.get("FT_E2E_APPS", Path(__file__).resolve().parent.parent / "apps")) / "stage.py")
SPARK = {"conf": {"spark.sql.shuffle.partitions": "1"}}
RESTARTS = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 4,
    "restart-strategy.fixed-delay.delay": "5 s",
}


def stage(task_id, **kwargs):
    return SparkStageOperator(task_id=task_id, application=APP, **SPARK, **kwargs)


with DAG("ft_e2e_server_loss", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    with FailoverPipeline(restart_strategy=RESTARTS, spark_conn_id="spark_connect_loss"):
        stage("S", outputs=["s"])
        t1 = stage("T1", inputs=["s"], outputs={"t1": "pipelined"})
        t2 = stage("T2", inputs=["t1"], outputs=["t2"], application_args=["sleep_on_try=2:25"])
        stage("U", inputs=["t2"], outputs=["u"])

    @task
    def gate(dag_run=None):
        """Wait for the test's go file (it takes the server away first)."""
        go = run_dir(dag_run.dag_id, dag_run.run_id) / "go"
        deadline = time.monotonic() + 900
        while not go.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {go}")
            time.sleep(1)

    t1 >> gate() >> t2
