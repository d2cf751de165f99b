"""Pipelines of the failure scenarios that need a distributed deployment (tests/cluster).

They reuse the stage application of the region-failover tests (tests/e2e/apps/stage.py: a task at
depth d below the source outputs value = key * 10 + d), on the deployment's Spark Connect server.
Faults are injected per run through conf {"ft_faults": [...]}.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, task

from airflow_ft_provider.decorators import ft_stage
from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

APP = str(
    Path(os.environ.get("FT_E2E_APPS", Path(__file__).resolve().parents[2] / "e2e" / "apps")) / "stage.py"
)
SPARK = {"conf": {"spark.sql.shuffle.partitions": "1"}}
COMMON = {"schedule": None, "start_date": datetime(2026, 1, 1), "catchup": False}


def fixed_delay(seconds):
    return {
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 3,
        "restart-strategy.fixed-delay.delay": f"{seconds} s",
    }


def stage(task_id, **kwargs):
    return SparkStageOperator(task_id=task_id, application=APP, **SPARK, **kwargs)


def pipelined_region(dag_id, restart_strategy, t2_args=()):
    """S --s--> [ T1 ~~t1 (pipelined: a view of the Connect server)~~> T2 ] --t2--> U"""
    with DAG(dag_id, **COMMON) as dag:
        with FailoverPipeline(restart_strategy=restart_strategy):
            stage("S", outputs=["s"])
            stage("T1", inputs=["s"], outputs={"t1": "pipelined"})
            stage("T2", inputs=["t1"], outputs=["t2"], application_args=list(t2_args))
            stage("U", inputs=["t2"], outputs=["u"])
    return dag


# T2's first try sleeps long enough for the test to kill the Celery worker that runs it.
pipelined_region("ft_cluster_worker_loss", fixed_delay(5), t2_args=["sleep_on_try=1:300"])
# T2 fails once (conf ft_faults) while the REST API is unreachable from the workers.
pipelined_region("ft_cluster_api_outage", fixed_delay(2))
# T2 fails once; T1's new try waits 30 s deferred (in the triggerer), which is down from 5 s to 50 s.
pipelined_region("ft_cluster_triggerer_loss", fixed_delay(30))

#   F --f--> G        F fails once; its restart waits 45 s, during which the scheduler is restarted
with DAG("ft_cluster_backoff", **COMMON):
    with FailoverPipeline(restart_strategy=fixed_delay(45)):
        stage("F", outputs=["f"])
        stage("G", inputs=["f"], outputs=["g"])

# W alone: its write takes 60 s in the Spark server (two Spark tasks of 60 s, side by side), each noting
# in LEDGERS/<run id> (on the Spark host's disk) which try computed it; the test loses W's Celery worker
# in the middle of it. 60 s, not 40: the retry starts 20-36 s after the loss (the heartbeat timeout,
# then scheduling on a loaded machine), and it must find the write still running.
LEDGERS = "/tmp/ft-cluster-ledgers"
with DAG("ft_cluster_running_write", **COMMON):
    with FailoverPipeline(restart_strategy=fixed_delay(1)):
        stage("W", outputs=["w"], application_args=["slow_write=60", f"ledger={LEDGERS}"])


# V alone: a 40 s write; the test SIGKILLs one Spark worker (with its executor) in the middle of
# it, and Spark, not Airflow, runs the lost task again on the other worker.
with DAG("ft_cluster_spark_worker_loss", **COMMON):
    with FailoverPipeline(restart_strategy=fixed_delay(1)):
        stage("V", outputs=["v"], application_args=["slow_write=40", f"ledger={LEDGERS}"])


#   make_samples --samples (6 files)--> scale_slowly (checkpointed: one file per micro-batch, 2 s each)
# Both on the Spark host (the executors' data path; scale_slowly's Spark checkpoint stays there). One
# test loses scale_slowly's Celery worker once the store holds micro-batch 3's output (of 0-5): the
# retry, on the other worker, resumes from the Spark checkpoint of the same Connect server. Another
# loses a whole Spark worker (with its executor) in the middle: Spark runs the lost tasks again, and
# Airflow nothing.
@ft_stage(outputs=["samples"], **SPARK)
def make_samples(spark, io):
    samples = spark.range(0, 4800, numPartitions=6)
    io.write("samples", samples.selectExpr("id AS sensor", "id % 60 AS minute", "id % 13 AS level"))


@ft_stage(
    inputs=["samples"],
    outputs=["scaled"],
    checkpointing={"execution.checkpointing.interval-volume": "1 kb"},
    **SPARK,
)
def scale_slowly(spark, io):
    def slowly(batches):  # in the Spark server's Python workers (pickled by value: nested), 2 s a batch
        import time

        time.sleep(2)
        yield from batches

    samples = io.read_stream("samples")
    slowed = samples.mapInArrow(slowly, samples.schema)
    io.write_stream("scaled", slowed.selectExpr("sensor", "minute", "level * 10 AS level"))


for checkpointed_dag_id in ("ft_cluster_checkpoint_worker_loss", "ft_cluster_checkpoint_spark_worker_loss"):
    with DAG(checkpointed_dag_id, **COMMON):
        with FailoverPipeline(restart_strategy=fixed_delay(1)):
            make_samples()
            scale_slowly()


# -- the infrastructure's losses (tests/cluster/test_infrastructure_loss.py) ---------------------------

WORKER_SLOTS = 8  # the deployment's two Celery workers, four task slots each


@task
def occupy(seconds):
    import time

    time.sleep(seconds)


# Every worker slot taken for 45 s: a task queued meanwhile waits in the broker (Redis).
with DAG("ft_cluster_busy", **COMMON):
    occupy.expand(seconds=[45] * WORKER_SLOTS)

#   S --s--> T        S waits in Redis (every slot busy) when Redis is SIGKILLed
with DAG("ft_cluster_broker_loss", **COMMON):
    with FailoverPipeline(restart_strategy=fixed_delay(5)):
        stage("S", outputs=["s"])
        stage("T", inputs=["s"], outputs=["t"])

#   M --m--> N        M: a 40 s write on the Connect server (an application of the cluster); N: a
# spark-submit application of the same cluster. The Spark master is SIGKILLed 10 s into M's write and
# started again 45 s later: N is submitted while it is down.
with DAG("ft_cluster_master_loss", **COMMON):
    with FailoverPipeline(restart_strategy=fixed_delay(5)):
        stage("M", outputs=["m"], application_args=["slow_write=40", f"ledger={LEDGERS}"])
        stage("N", inputs=["m"], outputs=["n"], spark_conn_id="spark_submit")

#   P --p--> Q        P: a 90 s write; PostgreSQL (the metadata database) is shut down 10 s into it and
# started again 75 s later. The write outlasts the try's supervisor, which kills the try 30-55 s into
# the outage (3 failed heartbeats, each retried with backoff).
with DAG("ft_cluster_database_loss", **COMMON):
    with FailoverPipeline(restart_strategy=fixed_delay(5)):
        stage("P", outputs=["p"], application_args=["slow_write=90", f"ledger={LEDGERS}"])
        stage("Q", inputs=["p"], outputs=["q"])

#   A --a--> B        A: a 40 s write; the API server (REST API, UI and the tasks' execution API) is
# SIGKILLed 10 s into it and started again 60 s later
with DAG("ft_cluster_api_server_loss", **COMMON):
    with FailoverPipeline(restart_strategy=fixed_delay(5)):
        stage("A", outputs=["a"], application_args=["slow_write=40", f"ledger={LEDGERS}"])
        stage("B", inputs=["a"], outputs=["b"])

#   D --d--> E        one Celery worker's disk is full (its logs and temporary directory)
with DAG("ft_cluster_disk_full", **COMMON):
    with FailoverPipeline(restart_strategy=fixed_delay(5)):
        stage("D", outputs=["d"])
        stage("E", inputs=["d"], outputs=["e"])
