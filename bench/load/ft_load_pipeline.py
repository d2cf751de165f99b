"""The pipeline of bench/bench_load.py: 30 task instances, ten shards of three stages.

    [ extract[i] ~~pointwise, pipelined~~> clean[i] ] --pointwise, blocking--> score[i]      i < 10

Each shard's extract and clean are a failover region; score[i] its consumer. Every stage runs
tests/e2e/apps/stage.py on the deployment's Spark Connect server.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

SHARDS = 10
APP = str(
    Path(os.environ.get("FT_E2E_APPS", Path(__file__).resolve().parents[2] / "tests" / "e2e" / "apps"))
    / "stage.py"
)
SPARK = {"application": APP, "conf": {"spark.sql.shuffle.partitions": "1"}}
RESTART = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 3,
    "restart-strategy.fixed-delay.delay": "1 s",
}

with DAG(
    "ft_load_pipeline", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=20
):
    with FailoverPipeline(restart_strategy=RESTART, per_region_restarts=True):
        SparkStageOperator.partial(task_id="extract", outputs={"extracted": "pipelined"}, **SPARK).expand(
            application_args=[[str(SHARDS), "keys=100"] for _ in range(SHARDS)]
        )
        SparkStageOperator.partial(
            task_id="clean", inputs={"extracted": "pointwise"}, outputs=["cleaned"], **SPARK
        ).expand(application_args=[[] for _ in range(SHARDS)])
        SparkStageOperator.partial(
            task_id="score", inputs={"cleaned": "pointwise"}, outputs=["scored"], **SPARK
        ).expand(application_args=[[] for _ in range(SHARDS)])
