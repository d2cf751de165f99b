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


PRICES = {"apple": 0.5}


def priced(spark, io, fruit):
    """Index 0 looks up a fruit that is not there (a bug); index 1 works slowly, in the same region."""
    import time

    if fruit != "banana":
        time.sleep(120)
    price = PRICES[fruit]  # KeyError: 'banana'
    io.write("prices", spark.range(3).selectExpr(f"{price} AS price"))


def total(spark, io):
    io.write("total", io.read("prices").groupBy().sum("price"))


# Every setting at its default (no restart strategy, no failure rules): a Python bug must end the run
# within a minute, not restart once a minute for days (tests/e2e/test_stop_region.py).
#   priced[0..1] ~~prices (pipelined)~~> total
with DAG("ft_e2e_defaults_key_error", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    with FailoverPipeline():
        SparkStageOperator.partial(
            task_id="priced", python_callable=priced, outputs={"prices": "pipelined"}
        ).expand(application_args=[["banana"], ["apple"]])
        SparkStageOperator(task_id="total", python_callable=total, inputs=["prices"], outputs=["total"])
