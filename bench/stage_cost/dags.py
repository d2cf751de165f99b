"""DAGs of bench/bench_stage_cost.py: one trivial stage per way of running it, and a no-op task.

* bench_cost_noop: a Python task that does nothing (what Airflow itself costs per task);
* bench_cost_connect: one stage writing one row, on the Spark Connect server (spark_default);
* bench_cost_submit: the same stage as its own spark-submit (spark_submit).
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, task

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

APP = str(Path(os.environ.get("FT_BENCH_COST_APPS", Path(__file__).resolve().parent)) / "trivial_stage.py")
COMMON = {"schedule": None, "start_date": datetime(2026, 1, 1), "catchup": False, "tags": ["ft-bench"]}
NONE = {"restart-strategy.type": "none"}

with DAG("bench_cost_noop", **COMMON):

    @task
    def noop():
        return None

    noop()

for dag_id, conn_id in (("bench_cost_connect", "spark_default"), ("bench_cost_submit", "spark_submit")):
    with DAG(dag_id, **COMMON):
        with FailoverPipeline(restart_strategy=NONE, spark_conn_id=conn_id):
            SparkStageOperator(
                task_id="trivial",
                application=APP,
                outputs=["one_row"],
                conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"},
            )
