"""A stage with a code bug (a misspelt column) under a strategy that allows restarts: it fails once,
not restarted (tests/e2e/test_metrics.py counts it)."""

from datetime import datetime

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

# Restarts are allowed: a failure a restart cannot heal must not use them.
RESTARTS = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 5,
    "restart-strategy.fixed-delay.delay": "1 s",
}


def misspelt_column(spark, io):
    io.write("amounts", spark.range(5).selectExpr("id AS order_id").select("amout"))


with DAG("ft_e2e_code_bug", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    with FailoverPipeline(restart_strategy=RESTARTS):
        SparkStageOperator(task_id="amounts", python_callable=misspelt_column, outputs=["amounts"])


def shard(spark, io, behaviour):
    """Index 0 has the bug; index 1 works slowly (long enough to be stopped by index 0's failure)."""
    import time

    frame = spark.range(5).selectExpr("id AS order_id")
    if behaviour == "bug":
        frame = frame.select("amout")
    else:
        time.sleep(120)
    io.write("parts", frame)


def combine(spark, io):
    io.write("total", io.read("parts").groupBy().count())


# shard[0..1] ~~parts (pipelined)~~> combine: one failover region (tests/e2e/test_stop_region.py).
with DAG("ft_e2e_stop_region", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    with FailoverPipeline(restart_strategy=RESTARTS):
        SparkStageOperator.partial(
            task_id="shard", python_callable=shard, outputs={"parts": "pipelined"}
        ).expand(application_args=[["bug"], ["slow"]])
        SparkStageOperator(task_id="combine", python_callable=combine, inputs=["parts"], outputs=["total"])
