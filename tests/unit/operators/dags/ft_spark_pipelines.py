"""Test pipelines for the Spark stage operator (run with dag.test() by tests/unit/operators/)."""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, task

from airflow_ft_provider.hooks.partition_store import pipeline_store
from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

APPS = Path(os.environ["FT_TEST_APPS"])
STORE = os.environ["FT_TEST_STORE_URL"]
MARKERS = os.environ.get("FT_TEST_MARKERS", "/tmp")
SPARK = {"conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}}
NONE = {"restart-strategy.type": "none"}

#   generate --orders--> revenue
with DAG("ft_two_stages", schedule=None, start_date=datetime(2026, 1, 1)):
    with FailoverPipeline(store=STORE, restart_strategy=NONE):
        SparkStageOperator(
            task_id="generate", application=str(APPS / "generate_orders.py"), outputs=["orders"], **SPARK
        )
        SparkStageOperator(
            task_id="revenue",
            application=str(APPS / "daily_revenue.py"),
            inputs=["orders"],
            outputs=["revenue"],
            application_args=[MARKERS],
            **SPARK,
        )

#   generate --orders--> delete_orders (plain task) --> revenue: the input is gone when revenue starts
with DAG("ft_missing_input", schedule=None, start_date=datetime(2026, 1, 1)):
    with FailoverPipeline(store=STORE, restart_strategy=NONE) as pipeline:
        generate = SparkStageOperator(
            task_id="generate", application=str(APPS / "generate_orders.py"), outputs=["orders"], **SPARK
        )
        revenue = SparkStageOperator(
            task_id="revenue",
            application=str(APPS / "daily_revenue.py"),
            inputs=["orders"],
            outputs=["revenue"],
            application_args=[MARKERS],
            **SPARK,
        )

        @task
        def delete_orders(run_id=None):
            """Lose one data object of the committed partition, as a lifecycle bug or an operator would."""
            store = pipeline_store(pipeline.description)
            ref = store_run(run_id).parse("orders")
            entry = store.manifest(ref).files[0]
            store.client.delete_object(
                Bucket=store.bucket, Key=store.layout.partition_prefix(ref) + entry.key
            )

        generate >> delete_orders() >> revenue

#   a stage whose application fails after writing one of its two outputs
with DAG("ft_failing_app", schedule=None, start_date=datetime(2026, 1, 1)):
    with FailoverPipeline(store=STORE, restart_strategy=NONE):
        SparkStageOperator(
            task_id="broken", application=str(APPS / "fail.py"), outputs=["first", "second"], **SPARK
        )

#   shard[0..2] --orders (pointwise)--> shard_revenue[0..2]
#             \\--orders (all-to-all)--> total_revenue
with DAG("ft_mapped", schedule=None, start_date=datetime(2026, 1, 1)):
    with FailoverPipeline(store=STORE, restart_strategy=NONE):
        SparkStageOperator.partial(
            task_id="shard", application=str(APPS / "generate_orders.py"), outputs=["orders"], **SPARK
        ).expand(application_args=[["3"], ["3"], ["3"]])
        SparkStageOperator.partial(
            task_id="shard_revenue",
            application=str(APPS / "daily_revenue.py"),
            inputs={"orders": "pointwise"},
            outputs=["revenue"],
            **SPARK,
        ).expand(application_args=[[MARKERS], [MARKERS], [MARKERS]])
        SparkStageOperator(
            task_id="total_revenue",
            application=str(APPS / "daily_revenue.py"),
            inputs=["orders"],
            outputs=["revenue_total"],
            **SPARK,
        )

#   shard[i] ~~orders[i] (pipelined, pointwise)~~> shard_revenue[i], i = 0, 1   (spark-submit: S3 scratch)
#   the shape that failed on every run while consumers looked for the producer's XCom at map index -1
with DAG("ft_mapped_pipelined", schedule=None, start_date=datetime(2026, 1, 1)):
    with FailoverPipeline(store=STORE, restart_strategy=NONE):
        SparkStageOperator.partial(
            task_id="shard",
            application=str(APPS / "generate_orders.py"),
            outputs={"orders": "pipelined"},
            **SPARK,
        ).expand(application_args=[["2"], ["2"]])
        SparkStageOperator.partial(
            task_id="shard_revenue",
            application=str(APPS / "daily_revenue.py"),
            inputs={"orders": "pointwise"},
            outputs=["revenue"],
            **SPARK,
        ).expand(application_args=[[MARKERS], [MARKERS]])


def total_revenue(spark, io):
    """A stage as a Python callable (Spark Connect): the session and the stage's I/O are passed in."""
    from pyspark.sql import functions as F

    totals = (
        io.read("revenue")
        .groupBy("day")
        .agg(F.sum("revenue").alias("revenue"), F.sum("orders").alias("orders"))
    )
    io.write("revenue_total", totals)


#   [ generate[0] ~~orders[0]~~> revenue[0] ]--+
#   [ generate[1] ~~orders[1]~~> revenue[1] ]--+--revenue--> total (python_callable)
#   on a Spark Connect server: the pipelined orders stay in the server as views
with DAG("ft_connect", schedule=None, start_date=datetime(2026, 1, 1)):
    with FailoverPipeline(store=STORE, restart_strategy=NONE, spark_conn_id="spark_connect_test"):
        SparkStageOperator.partial(
            task_id="generate",
            application=str(APPS / "generate_orders.py"),
            outputs={"orders": "pipelined"},
            **SPARK,
        ).expand(application_args=[["2"], ["2"]])
        SparkStageOperator.partial(
            task_id="revenue",
            application=str(APPS / "daily_revenue.py"),
            inputs={"orders": "pointwise"},
            outputs=["revenue"],
            **SPARK,
        ).expand(application_args=[[MARKERS], [MARKERS]])
        SparkStageOperator(
            task_id="total",
            python_callable=total_revenue,
            inputs=["revenue"],
            outputs=["revenue_total"],
            **SPARK,
        )


def store_run(run_id):
    from airflow_ft_provider.partitions import RunRef

    return RunRef("ft_missing_input", run_id)


# Failure classification: six independent stages under a strategy that allows restarts. Code bugs fail
# once, without a restart (a misspelt column on Spark Connect and under spark-submit, an
# AirflowFailException, an exception the stage lists as not recoverable, on Connect and in a spark-submit
# driver); a flaky stage restarts.
RESTARTS = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 5,
    "restart-strategy.fixed-delay.delay": "0 s",
}


def misspelt_column(spark, io):
    io.write("connect_out", spark.range(3).select("idd"))


def fail_fast(spark, io):
    from airflow.sdk.exceptions import AirflowFailException

    raise AirflowFailException("the input is for another tenant: do not retry")


def flaky(spark, io):
    marker = Path(MARKERS) / "flaky-ran-once"
    if not marker.exists():
        marker.touch()
        raise ConnectionResetError("the shuffle service went away")
    io.write("flaky_out", spark.range(3))


class BadRecord(ValueError):
    pass


def bad_record(spark, io):
    raise BadRecord("order 17 has a negative amount")


with DAG("ft_classified", schedule=None, start_date=datetime(2026, 1, 1)):
    with FailoverPipeline(store=STORE, restart_strategy=RESTARTS, spark_conn_id="spark_connect_test"):
        SparkStageOperator(task_id="connect_bug", python_callable=misspelt_column, outputs=["connect_out"])
        SparkStageOperator(
            task_id="submit_bug",
            application=str(APPS / "misspelt_column.py"),
            outputs=["submit_out"],
            spark_conn_id="spark_default",
            **SPARK,
        )
        SparkStageOperator(
            task_id="submit_bad_record",
            application=str(APPS / "bad_record.py"),
            outputs=["submit_bad_record_out"],
            spark_conn_id="spark_default",
            failure_rules={"non_recoverable_exceptions": ["__main__.BadRecord"]},  # the driver's own type
            **SPARK,
        )
        SparkStageOperator(task_id="fail_fast", python_callable=fail_fast, outputs=["fail_fast_out"])
        SparkStageOperator(task_id="flaky", python_callable=flaky, outputs=["flaky_out"])
        SparkStageOperator(
            task_id="bad_record",
            python_callable=bad_record,
            outputs=["bad_record_out"],
            failure_rules={"non_recoverable_exceptions": [BadRecord]},
        )
