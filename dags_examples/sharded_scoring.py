"""Example: an embarrassingly parallel pipeline, two mapped stages joined shard by shard.

    [ read_shard[0] ~~shard_readings[0]~~> score_shard[0] ] --shard_scores[0]--+
    [ read_shard[1] ~~shard_readings[1]~~> score_shard[1] ] --shard_scores[1]--+--> merge_shards
    [ read_shard[2] ~~shard_readings[2]~~> score_shard[2] ] --shard_scores[2]--+
          pipelined, pointwise (map index i feeds i)              blocking, all-to-all

Seed 002's "embarrassingly parallel" shape: each shard's pipelined pair is its own failover region.
When score_shard[1] fails, only read_shard[1] and score_shard[1] run again (a pipelined partition is
never re-read after a failure); the other shards' partitions stay in S3 and merge_shards reads all
three once they exist.

Try: ``{"ft_faults": [{"task": "score_shard[1]", "times": 2}]}`` (shard 1 fails twice, 3 s apart).
"""

from airflow.sdk import DAG
from example_support import COMMON, SPARK, fault_params, job

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

SHARDS = 3
RESTART_STRATEGY = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 3,
    "restart-strategy.fixed-delay.delay": "3 s",
}

with DAG(
    "ft_example_sharded_scoring",
    description="Mapped stages joined shard by shard; one failing shard restarts alone",
    params=fault_params('[{"task": "score_shard[1]", "times": 1}]'),
    doc_md=__doc__,
    **COMMON,
):
    # per_region_restarts: each shard has its own restart budget (the failure count is per region).
    with FailoverPipeline(restart_strategy=RESTART_STRATEGY, per_region_restarts=True):
        SparkStageOperator.partial(
            task_id="read_shard",
            application=job("read_shard.py"),
            outputs={"shard_readings": "pipelined"},
            **SPARK,
        ).expand(application_args=[[str(shard), str(SHARDS)] for shard in range(SHARDS)])
        SparkStageOperator.partial(
            task_id="score_shard",
            application=job("score_shard.py"),
            inputs={"shard_readings": "pointwise"},
            outputs=["shard_scores"],
            **SPARK,
        ).expand(application_args=[[] for _ in range(SHARDS)])
        SparkStageOperator(
            task_id="merge_shards",
            application=job("merge_shards.py"),
            inputs=["shard_scores"],
            outputs=["sensor_totals"],
            **SPARK,
        )
