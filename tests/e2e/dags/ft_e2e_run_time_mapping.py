"""Stages mapped over another task's output (tests/e2e/test_run_time_mapping.py; the example DAG
dags_examples/daily_files.py is the main pipeline of those tests).

    ft_e2e_count_mismatch:  three() ──▶ left[0..2] ~~sides (pipelined, pointwise)~~▶ right[0..1] ◀── two()
    ft_e2e_map_over_map:    sizes() ──▶ make[0..2] ──made (pointwise)──▶ follow[i] (over make's results)
    ft_e2e_auto_parallelism: produce ──raw──▶ (auto_parallelism) ──▶ sized[0..n) ──sized──▶ total
    ft_e2e_auto_parallelism_1gb: produce_volume ──volume (1 GB)──▶ (auto_parallelism) ──▶ volume_slice[0..n)
    ft_e2e_checkpointed_mapped: two_parts() ──▶ make_part[i] ──readings──▶ scale_part[i] (checkpointed)
"""

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_ft_provider.decorators import ft_stage
from airflow_ft_provider.model.auto_parallelism import AVG_VOLUME, MAX_PARALLELISM
from airflow_ft_provider.operators.auto_parallelism import auto_parallelism
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


#   produce ──raw──▶ auto_parallelism (planner) ──▶ sized[i] ──sized──▶ total
# sized has as many shards as raw's committed size asks for at 1 MB a shard (Flink's rule); each
# shard keeps the rows of its share. produce writes a random number of rows (rows to 2 * rows): a
# rebuilt raw has another size, and the run keeps the count it decided.
@ft_stage(outputs=["raw"])
def produce(spark, io, rows):
    import random

    rows = int(rows)  # rendered from the run's conf
    count = rows + random.randint(0, rows)
    io.write("raw", spark.range(count).selectExpr("id", "sha2(cast(id AS STRING), 256) AS pad"))


@ft_stage(inputs=["raw"], outputs=["sized"])
def sized(spark, io, shard, shards):
    io.write(
        "sized", io.read("raw").where(f"id % {shards} = {shard}").selectExpr("id", f"{shards} AS shards")
    )


@ft_stage(inputs=["sized"], outputs=["total"])
def total(spark, io):
    io.write("total", io.read("sized").selectExpr("count(*) AS rows", "count(DISTINCT id) AS ids"))


with DAG("ft_e2e_auto_parallelism", **COMMON):
    with FailoverPipeline(restart_strategy=FAST_FIXED):
        produce(rows="{{ dag_run.conf.get('rows', 1000) }}")
        sized.expand_kwargs(auto_parallelism({AVG_VOLUME: "1 MB", MAX_PARALLELISM: 16}))
        total()


#   produce_volume ──volume──▶ auto_parallelism (planner) ──▶ volume_slice[i]
# volume: 1.1 million rows of 1,000 random characters that Parquet cannot compress, just over 1 GB; its
# slices at 256 MB each are as many as the rule says. They read none of it: the decision is what is
# tested (the 10 MB runs above check that every row lands in exactly one shard).
@ft_stage(outputs=["volume"])
def produce_volume(spark, io, rows):
    io.write("volume", spark.range(int(rows), numPartitions=8).selectExpr("id", "randstr(1000) AS pad"))


@ft_stage(inputs=["volume"], outputs=["slices"])
def volume_slice(spark, io, shard, shards):
    io.write("slices", spark.range(1).selectExpr(f"{shard} AS shard", f"{shards} AS shards"))


with DAG("ft_e2e_auto_parallelism_1gb", **COMMON):
    with FailoverPipeline(restart_strategy=FAST_FIXED):
        produce_volume(rows="{{ dag_run.conf.get('rows', 1100000) }}")
        volume_slice.expand_kwargs(auto_parallelism({AVG_VOLUME: "256 MB", MAX_PARALLELISM: 64}))


#   two_parts() ──▶ make_part[i] ──readings (pointwise)──▶ scale_part[i] (checkpointed: 1 kb a micro-batch)
@task
def two_parts() -> list[int]:
    return [0, 1]


@ft_stage(outputs=["readings"])
def make_part(spark, io, part):
    """3000 readings of part ``part`` in 6 files."""
    readings = spark.range(part * 3000, (part + 1) * 3000, numPartitions=6).selectExpr("id AS reading")
    io.write("readings", readings)


@ft_stage(
    inputs={"readings": "pointwise"},
    outputs=["scaled"],
    checkpointing={"execution.checkpointing.interval-volume": "1 kb"},
)
def scale_part(spark, io, part):
    io.write_stream("scaled", io.read_stream("readings").selectExpr("reading", f"{part} AS part"))


with DAG("ft_e2e_checkpointed_mapped", **COMMON):
    with FailoverPipeline(restart_strategy=FAST_FIXED):
        parts = two_parts()
        make_part.expand(part=parts)
        scale_part.expand(part=parts)
