"""This provider's pipeline of the recovery benchmark, built by ``ft_pipeline`` for ft_dags.py (a file
of its own, as a user's) and for dags.py's "mixed" variant (the same pipeline in the file of the
comparisons: its task processes also import what those import). Defines no DAG itself.
"""

from airflow.sdk import DAG
from shape import COMMON, FAIL_ONCE, HERE, RUN_DIR, SPARK, stages

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline


def ft_pipeline(dag_id: str, conn_id: str, concurrency: int) -> DAG:
    """FailoverPipeline, region failover, fixed-delay 0 s; each stage on ``conn_id``."""
    with DAG(dag_id, **{**COMMON, "max_active_tasks": concurrency}) as dag:
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
    return dag
