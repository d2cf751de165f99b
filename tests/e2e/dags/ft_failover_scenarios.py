"""Pipelines of the region-failover end-to-end tests (tests/e2e/test_region_failover.py).

Faults are injected per run through conf {"ft_faults": [...]} (airflow_ft_provider/faults/).
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

# The live-Airflow fixture copies DAG files into its own dags folder and names the apps folder.
APP = str(Path(os.environ.get("FT_E2E_APPS", Path(__file__).resolve().parent.parent / "apps")) / "stage.py")
SPARK = {
    "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1", "spark.driver.memory": "512m"}
}
FAST_FIXED = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 5,
    "restart-strategy.fixed-delay.delay": "2 s",
}
# A restarted task waits longer than MIN_DEFERRAL_SECONDS (5 s) deferred: the mapped scenario checks it.
SLOW_FIXED = {**FAST_FIXED, "restart-strategy.fixed-delay.delay": "40 s"}
# Ahead of the exchange matrix's many tasks when worker slots are short: these scenarios time restarts.
COMMON = {
    "schedule": None,
    "start_date": datetime(2026, 1, 1),
    "catchup": False,
    "default_args": {"priority_weight": 100},
}


def stage(task_id, **kwargs):
    return SparkStageOperator(task_id=task_id, application=APP, **SPARK, **kwargs)


#   A --a--> B --b--> C
#              \\--b--> D          (seed 002, all blocking)
# ft_e2e_seed002_metrics is the same pipeline for tests/e2e/test_metrics.py alone: metrics are tagged by
# DAG, not by run, so its lines must not mix with the other seed 002 scenarios'.
for dag_id in ("ft_e2e_seed002", "ft_e2e_seed002_metrics"):
    with DAG(dag_id, **COMMON):
        with FailoverPipeline(restart_strategy=FAST_FIXED):
            stage("A", outputs=["a"])
            stage("B", inputs=["a"], outputs=["b"])
            stage("C", inputs=["b"], outputs=["c"])
            stage("D", inputs=["b"], outputs=["d"])

#   S --s--> [ T1 ~~t1 (pipelined)~~> T2 ] --t2--> U
# ft_e2e_pipelined runs on spark-submit (the live fixture's spark_submit connection): it keeps submit
# mode and pipelined partitions in S3 scratch covered live. ft_e2e_pipelined_connect is the same
# pipeline on the Spark Connect server, where t1 is a view the server holds.
for dag_id, spark_conn_id in (
    ("ft_e2e_pipelined", "spark_submit"),
    ("ft_e2e_pipelined_connect", "spark_default"),
):
    with DAG(dag_id, **COMMON):
        with FailoverPipeline(restart_strategy=FAST_FIXED, spark_conn_id=spark_conn_id):
            stage("S", outputs=["s"])
            stage("T1", inputs=["s"], outputs={"t1": "pipelined"})
            stage("T2", inputs=["t1"], outputs=["t2"])
            stage("U", inputs=["t2"], outputs=["u"])

#   T1 ~~t1 (pipelined, a view of the Connect server)~~> T2 (fails; restart strategy none): the run
# fails with t1 never consumed, and its end releases the view (airflow_ft_provider/run_end.py)
with DAG("ft_e2e_run_end", **COMMON):
    with FailoverPipeline(restart_strategy={"restart-strategy.type": "none"}, spark_conn_id="spark_default"):
        stage("T1", outputs={"t1": "pipelined"})
        stage("T2", inputs=["t1"], outputs=["t2"])

#   P (a random column: different rows every run) --p--> Q      (tests/e2e/test_reuse.py)
with DAG("ft_e2e_reuse_noisy", **COMMON):
    with FailoverPipeline(restart_strategy=FAST_FIXED):
        stage("P", outputs=["p"], application_args=["noise=1"])
        stage("Q", inputs=["p"], outputs=["q"])

#   P --p--> Q, reuse="across-runs": a second run's Q copies the first run's q     (tests/e2e/test_reuse.py)
with DAG("ft_e2e_reuse_across", **COMMON):
    with FailoverPipeline(restart_strategy=FAST_FIXED, reuse="across-runs"):
        stage("P", outputs=["p"])
        stage("Q", inputs=["p"], outputs=["q"])

#   read[0..1] --raw (pointwise)--> sink[0..1]      (embarrassingly parallel)
with DAG("ft_e2e_mapped", **COMMON):
    with FailoverPipeline(restart_strategy=SLOW_FIXED):
        SparkStageOperator.partial(task_id="read", application=APP, outputs=["raw"], **SPARK).expand(
            application_args=[["2"], ["2"]]
        )
        SparkStageOperator.partial(
            task_id="sink", application=APP, inputs={"raw": "pointwise"}, outputs=["sunk"], **SPARK
        ).expand(application_args=[[], []])


def always_failing(dag_id, restart_strategy):
    """F always fails before submitting (conf ft_faults); G depends on it and must end upstream_failed."""
    with DAG(dag_id, **COMMON) as dag:
        with FailoverPipeline(restart_strategy=restart_strategy):
            stage("F", outputs=["f"])
            stage("G", inputs=["f"])
    return dag


always_failing(
    "ft_e2e_fixed_delay",
    {
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 2,
        "restart-strategy.fixed-delay.delay": "6 s",
    },
)
always_failing(
    "ft_e2e_exponential",
    {
        "restart-strategy.type": "exponential-delay",
        "restart-strategy.exponential-delay.initial-backoff": "3 s",
        "restart-strategy.exponential-delay.backoff-multiplier": "2",
        "restart-strategy.exponential-delay.max-backoff": "8 s",
        "restart-strategy.exponential-delay.jitter-factor": "0",
        "restart-strategy.exponential-delay.attempts-before-reset-backoff": "3",
    },
)
always_failing(
    "ft_e2e_failure_rate",
    {
        "restart-strategy.type": "failure-rate",
        "restart-strategy.failure-rate.max-failures-per-interval": "2",
        "restart-strategy.failure-rate.failure-rate-interval": "10 min",
        "restart-strategy.failure-rate.delay": "1 s",
    },
)
