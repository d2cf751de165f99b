"""DAGs of bench/bench_pipelined_exchange.py: one pipelined exchange of about 150 MB, two ways.

    produce ~~rows (pipelined, ~150 MB as Parquet)~~> consume --summary-->

Both on the Spark Connect server: bench_exchange_engine keeps the pipelined partition in the server
(a cached view), bench_exchange_scratch commits it to S3 scratch and the consumer fetches it back.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

HERE = Path(os.environ.get("FT_BENCH_EXCHANGE_APPS", Path(__file__).resolve().parent))
COMMON = {"schedule": None, "start_date": datetime(2026, 1, 1), "catchup": False, "tags": ["ft-bench"]}
CONF = {"spark.sql.shuffle.partitions": "2"}

for dag_id, in_engine in (("bench_exchange_engine", True), ("bench_exchange_scratch", False)):
    with DAG(dag_id, **COMMON):
        with FailoverPipeline(
            restart_strategy={"restart-strategy.type": "none"}, pipelined_in_engine=in_engine
        ):
            SparkStageOperator(
                task_id="produce",
                application=str(HERE / "produce.py"),
                outputs={"rows": "pipelined"},
                conf=CONF,
            )
            SparkStageOperator(
                task_id="consume",
                application=str(HERE / "consume.py"),
                inputs=["rows"],
                outputs=["summary"],
                conf=CONF,
            )
