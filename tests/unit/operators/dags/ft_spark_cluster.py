"""The two-stage test pipeline of ft_spark_pipelines.py, for a Spark standalone cluster
(tests/unit/operators/test_spark_stage_cluster.py).

The master comes from the ``spark_default`` connection (``spark://127.0.0.1:PORT``); the driver runs in
client mode on the Airflow worker, the executors on the standalone worker.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

APPS = Path(os.environ["FT_TEST_APPS"])
STORE = os.environ["FT_TEST_STORE_URL"]
MARKERS = os.environ.get("FT_TEST_MARKERS", "/tmp")
CLUSTER = {
    "conf": {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        # Client mode: executors connect back to the driver on this machine, over loopback.
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        # One executor with the worker's single core, within its 1 GiB.
        "spark.cores.max": "1",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
    },
}
NONE = {"restart-strategy.type": "none"}

#   generate --orders--> revenue
with DAG("ft_cluster_two_stages", schedule=None, start_date=datetime(2026, 1, 1)):
    with FailoverPipeline(store=STORE, restart_strategy=NONE):
        SparkStageOperator(
            task_id="generate", application=str(APPS / "generate_orders.py"), outputs=["orders"], **CLUSTER
        )
        SparkStageOperator(
            task_id="revenue",
            application=str(APPS / "daily_revenue.py"),
            inputs=["orders"],
            outputs=["revenue"],
            application_args=[MARKERS],
            **CLUSTER,
        )
