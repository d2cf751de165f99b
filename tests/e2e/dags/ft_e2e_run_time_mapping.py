"""Stages mapped over another task's output (tests/e2e/test_run_time_mapping.py; the example DAG
dags_examples/daily_files.py is the main pipeline of those tests).

    ft_e2e_count_mismatch:  three() ──▶ left[0..2] ~~sides (pipelined, pointwise)~~▶ right[0..1] ◀── two()
    ft_e2e_map_over_map:    sizes() ──▶ make[0..2] ──made (pointwise)──▶ follow[i] (over make's results)
"""

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_ft_provider.decorators import ft_stage
from airflow_ft_provider.pipeline import FailoverPipeline

COMMON = {"schedule": None, "start_date": datetime(2026, 1, 1), "catchup": False}
FAST_FIXED = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 3,
    "restart-strategy.fixed-delay.delay": "2 s",
}


@task
def three() -> list[int]:
    return [0, 1, 2]


@task
def two() -> list[int]:
    return [0, 1]


@ft_stage(outputs={"sides": "pipelined"})
def left(spark, io, n):
    io.write("sides", spark.range(n, n + 1))


@ft_stage(inputs={"sides": "pointwise"}, outputs=["paired"])
def right(spark, io, n):
    io.write("paired", io.read("sides"))


with DAG("ft_e2e_count_mismatch", **COMMON):
    with FailoverPipeline(restart_strategy=FAST_FIXED):
        left.expand(n=three())
        right.expand(n=two())


@task
def sizes() -> list[int]:
    return [1, 2, 3]


@ft_stage(outputs=["made"])
def make(spark, io, size):
    io.write("made", spark.range(size).selectExpr(f"{size} AS size", "id"))


@ft_stage(inputs={"made": "pointwise"}, outputs=["followed"])
def follow(spark, io, committed):
    """``committed``: what make[i]'s try returned (partition id -> what it committed), as Airflow maps
    over make's results."""
    [(partition, entry)] = committed.items()
    io.write(
        "followed",
        io.read("made").selectExpr("size", "id", f"'{partition}' AS source", f"{entry['rows']} AS rows"),
    )


with DAG("ft_e2e_map_over_map", **COMMON):
    with FailoverPipeline(restart_strategy=FAST_FIXED):
        made = make.expand(size=sizes())
        follow.expand(committed=made.output)
