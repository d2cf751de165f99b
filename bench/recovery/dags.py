"""The recovery benchmark's pipeline, four ways (bench/bench_recovery_work.py drives them).

    extract --> b1_s1 --> b1_s2 --> b1_s3
           \\-> b2_s1 --> b2_s2 --> b2_s3      (4 independent branches of 3 stages, all blocking)
           \\-> b3_s1 --> ...
           \\-> b4_s1 --> ...

* bench_recovery_ft: this provider (FailoverPipeline, region failover, fixed-delay 0 s), each stage a
  spark-submit; bench_recovery_ft_connect: the same, each stage a session on the Spark Connect server
  (bench_recovery_ft_connect_4: four stages at a time, one per branch).
* bench_recovery_retries: plain SparkSubmitOperators with Airflow's retries=1, retry_delay=0.
* bench_recovery_plain: the same without retries (for "clear failed + downstream" and "re-run all").
* bench_recovery_single_app: the whole pipeline as one Spark application, retries=1.

Faults come from the run's conf: {"fail_once": "b1_s3"} or {"lose": "b1_s3:b1_s2"} (b1_s3 loses
b1_s2's output before reading it); the ft DAG takes the same conf and maps "lose" to ft_faults.
"""

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

HERE = Path(os.environ.get("FT_BENCH_RECOVERY_APPS", Path(__file__).resolve().parent))
DATA = os.environ.get("FT_BENCH_RECOVERY_DATA", "/tmp/ft-bench-recovery")
BRANCHES, DEPTH = 4, 3
SPARK = {
    "conf": {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "1g",
    },
    "py_files": str(HERE / "work.py"),
}
# Two stages at a time on the 2-core machine, for every variant alike.
COMMON = {
    "schedule": None,
    "start_date": datetime(2026, 1, 1),
    "catchup": False,
    "max_active_tasks": 2,
    "tags": ["ft-bench"],
}
RUN_DIR = DATA + "/{{ dag.dag_id }}/{{ run_id }}"
FAIL_ONCE = "{{ dag_run.conf.get('fail_once', '-') }}"
LOSE = "{{ dag_run.conf.get('lose', '-') }}"


def stages():
    """(stage, upstream stage or None) in dependency order."""
    yield "extract", None
    for branch in range(1, BRANCHES + 1):
        for level in range(1, DEPTH + 1):
            yield f"b{branch}_s{level}", "extract" if level == 1 else f"b{branch}_s{level - 1}"


# bench_recovery_ft_connect_4: on the Spark Connect server with the four branches at once (the
# server's two cores shared by Spark's scheduler, as within the single application).
for dag_id, conn_id, concurrency in (
    ("bench_recovery_ft", "spark_submit", 2),
    ("bench_recovery_ft_connect", "spark_default", 2),
    ("bench_recovery_ft_connect_4", "spark_default", BRANCHES),
):
    with DAG(dag_id, **{**COMMON, "max_active_tasks": concurrency}):
        with FailoverPipeline(
            restart_strategy={
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": 3,
                "restart-strategy.fixed-delay.delay": "0 s",
            },
            spark_conn_id=conn_id,
        ):
            for name, upstream in stages():
                SparkStageOperator(
                    task_id=name,
                    application=str(HERE / "ft_stage.py"),
                    inputs=[upstream] if upstream else None,
                    outputs=[name],
                    application_args=[RUN_DIR + "/_faults", FAIL_ONCE],
                    spark_submit_kwargs={"py_files": SPARK["py_files"]},
                    conf=SPARK["conf"],
                )


def plain_dag(dag_id, retries):
    with DAG(dag_id, default_args={"retries": retries, "retry_delay": timedelta(0)}, **COMMON) as dag:
        tasks = {}
        for name, upstream in stages():
            tasks[name] = SparkSubmitOperator(
                task_id=name,
                conn_id="spark_submit",
                application=str(HERE / "plain_stage.py"),
                application_args=[RUN_DIR, name, upstream or "-", FAIL_ONCE, LOSE],
                **SPARK,
            )
            if upstream:
                tasks[upstream] >> tasks[name]
    return dag


plain_dag("bench_recovery_retries", retries=1)
plain_dag("bench_recovery_plain", retries=0)

with DAG("bench_recovery_single_app", default_args={"retries": 1, "retry_delay": timedelta(0)}, **COMMON):
    # local[2]: the whole machine, as the Spark Connect server has it (the per-stage variants run two
    # local[1] applications at a time).
    SparkSubmitOperator(
        task_id="pipeline",
        conn_id="spark_local2",
        application=str(HERE / "single_app.py"),
        application_args=[RUN_DIR, FAIL_ONCE],
        **SPARK,
    )
