"""The recovery benchmark's pipeline, four ways (bench/bench_recovery_work.py drives them).

    extract --> b1_s1 --> b1_s2 --> b1_s3
           \\-> b2_s1 --> b2_s2 --> b2_s3      (4 independent branches of 3 stages, all blocking)
           \\-> b3_s1 --> ...
           \\-> b4_s1 --> ...

* bench_recovery_ft, bench_recovery_ft_connect, bench_recovery_ft_connect_4: this provider, in
  ft_dags.py (a file of their own: see shape.py); bench_recovery_ft_connect_mixed: the same as
  bench_recovery_ft_connect, defined here beside the comparisons;
* bench_recovery_retries: plain SparkSubmitOperators with Airflow's retries=1, retry_delay=0.
* bench_recovery_plain: the same without retries (for "clear failed + downstream" and "re-run all").
* bench_recovery_single_app: the whole pipeline as one Spark application, retries=1.

Faults come from the run's conf: {"fail_once": "b1_s3"} or {"lose": "b1_s3:b1_s2"} (b1_s3 loses
b1_s2's output before reading it); the ft DAG takes the same conf and maps "lose" to ft_faults.
"""

from datetime import timedelta

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG
from ft_pipeline import ft_pipeline
from shape import COMMON, FAIL_ONCE, HERE, LOSE, RUN_DIR, SPARK, stages


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

with DAG(
    "bench_recovery_single_app",
    default_args={"retries": 1, "retry_delay": timedelta(0)},
    **COMMON,
):
    # local[2]: the whole machine, as the Spark Connect server has it (the per-stage variants run two
    # local[1] applications at a time).
    SparkSubmitOperator(
        task_id="pipeline",
        conn_id="spark_local2",
        application=str(HERE / "single_app.py"),
        application_args=[RUN_DIR, FAIL_ONCE],
        **SPARK,
    )

# This provider's pipeline in a file that imports the Spark provider's operator too (bench_recovery_work
# --failure-free-only measures it beside the same pipeline in a file of its own)
ft_pipeline("bench_recovery_ft_connect_mixed", "spark_default", 2)
