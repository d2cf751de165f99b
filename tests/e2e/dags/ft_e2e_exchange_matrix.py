"""Every exchange shape a user can declare, in one pipeline (tests/e2e/test_exchange_matrix.py).

One component per (exchange type, producer parallelism, consumer parallelism, pattern); the components
share nothing, so one run exercises them all at once. Each consumer writes a blocking output the test
reads back. Producer ``P_<shape>``, consumer ``C_<shape>``; shapes are named like ``pipelined_2to2_pw``.

    P[0..p-1] --x (blocking | pipelined, pointwise | all-to-all)--> C[0..c-1] --out_<shape>-->

With 1 on either side, Flink's pointwise rule connects every consumer to every partition, as
all-to-all does (tests/unit/failover checks both wirings are the same): those shapes are declared
once each, pointwise for 1->2 and all-to-all for 2->1.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

APP = str(Path(os.environ.get("FT_E2E_APPS", Path(__file__).resolve().parent.parent / "apps")) / "stage.py")
SPARK = {"conf": {"spark.sql.shuffle.partitions": "1"}}
# One budget per region: the run's components fail at once, each counts against its own region.
RESTARTS = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 2,
    "restart-strategy.fixed-delay.delay": "2 s",
}

SHAPES = {  # name: (exchange type, producers, consumers, pattern)
    f"{kind}_{name}": (kind, producers, consumers, pattern)
    for kind in ("blocking", "pipelined")
    for name, producers, consumers, pattern in (
        ("1to1", 1, 1, "all_to_all"),
        ("1to2_pw", 1, 2, "pointwise"),
        ("2to1_a2a", 2, 1, "all_to_all"),
        ("2to2_pw", 2, 2, "pointwise"),
        ("2to2_a2a", 2, 2, "all_to_all"),
    )
}


def stage(task_id, parallelism, **kwargs):
    if parallelism == 1:
        return SparkStageOperator(
            task_id=task_id, application=APP, application_args=kwargs.pop("args", []), **SPARK, **kwargs
        )
    args = kwargs.pop("args", [])
    return SparkStageOperator.partial(task_id=task_id, application=APP, **SPARK, **kwargs).expand(
        application_args=[list(args) for _ in range(parallelism)]
    )


# max_active_tasks is per run: the two matrix runs hold at most 6 of the live fixture's 8 worker slots,
# so the scenarios that time their restarts (tests/e2e/test_region_failover.py, priority_weight 100:
# queued first) always find a slot within one matrix task. Their timings are measured up to the
# queueing of a try, which the scheduler decides; the wait for a slot is the executor's.
with DAG(
    "ft_e2e_exchange_matrix",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_tasks=3,
):
    with FailoverPipeline(restart_strategy=RESTARTS, per_region_restarts=True):
        for shape, (kind, producers, consumers, pattern) in SHAPES.items():
            stage(f"P_{shape}", producers, outputs={f"x_{shape}": kind}, args=[str(producers)])
            stage(f"C_{shape}", consumers, inputs={f"x_{shape}": pattern}, outputs=[f"out_{shape}"])
