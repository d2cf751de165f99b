"""The big pipelines of bench/bench_big_pipeline.py (issue 27), on the reference deployment.

``ft_big_pipeline``, 302 task instances:

    [ extract[i] ~~pointwise, pipelined~~> clean[i] ~~pointwise, pipelined~~> score[i] ]   i < 100
      score[*] --all-to-all, blocking--> join --blocking--> sink

Each shard's three stages are a failover region of their own (100 regions of 3 tasks).

``ft_big_region_<n>``, one failover region of n task instances (n = 1, 10, 100, 300):

    feed[0..n-2] ~~all-to-all, pipelined~~> gather          (n = 1: gather alone)

Every stage runs tests/e2e/apps/stage.py on the deployment's Spark Connect server.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

SHARDS = 100
REGION_SIZES = (1, 10, 100, 300)
APP = str(
    Path(os.environ.get("FT_E2E_APPS", Path(__file__).resolve().parents[2] / "tests" / "e2e" / "apps"))
    / "stage.py"
)
SPARK = {"application": APP, "conf": {"spark.sql.shuffle.partitions": "1"}}
COMMON = {"schedule": None, "start_date": datetime(2026, 1, 1), "catchup": False, "max_active_tasks": 16}
RESTART = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 3,
    "restart-strategy.fixed-delay.delay": "1 s",
}

with DAG("ft_big_pipeline", **COMMON):
    with FailoverPipeline(restart_strategy=RESTART, per_region_restarts=True):
        SparkStageOperator.partial(task_id="extract", outputs={"extracted": "pipelined"}, **SPARK).expand(
            application_args=[[str(SHARDS), "keys=400"] for _ in range(SHARDS)]
        )
        SparkStageOperator.partial(
            task_id="clean", inputs={"extracted": "pointwise"}, outputs={"cleaned": "pipelined"}, **SPARK
        ).expand(application_args=[[] for _ in range(SHARDS)])
        SparkStageOperator.partial(
            task_id="score", inputs={"cleaned": "pointwise"}, outputs=["scored"], **SPARK
        ).expand(application_args=[[] for _ in range(SHARDS)])
        SparkStageOperator(task_id="join", inputs=["scored"], outputs=["joined"], **SPARK)
        SparkStageOperator(task_id="sink", inputs=["joined"], outputs=["sunk"], **SPARK)

for size in REGION_SIZES:
    with DAG(f"ft_big_region_{size}", **COMMON):
        with FailoverPipeline(restart_strategy=RESTART):
            if size > 1:
                SparkStageOperator.partial(task_id="feed", outputs={"fed": "pipelined"}, **SPARK).expand(
                    application_args=[[str(size - 1), "keys=400"] for _ in range(size - 1)]
                )
            SparkStageOperator(
                task_id="gather", inputs=["fed"] if size > 1 else [], outputs=["gathered"], **SPARK
            )
