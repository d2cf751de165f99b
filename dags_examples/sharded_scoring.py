"""Example: an embarrassingly parallel pipeline, one mapped task per shard.

    score_shard[0] --shard_scores[0]--+
    score_shard[1] --shard_scores[1]--+--> merge_shards      (all-to-all, blocking)
    score_shard[2] --shard_scores[2]--+

Every shard is its own failover region: when one shard fails only that map index runs again;
the other shards' partitions stay in S3 and merge_shards reads all three once they exist.

Try: ``{"ft_faults": [{"task": "score_shard[1]", "times": 2}]}`` (shard 1 fails twice, 3 s apart).
"""

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline
from example_support import COMMON, SPARK, fault_params, job

SHARDS = 3
RESTART_STRATEGY = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 3,
    "restart-strategy.fixed-delay.delay": "3 s",
}

with DAG(
    "ft_example_sharded_scoring",
    description="A mapped stage, one task per shard; one failing shard restarts alone",
    params=fault_params('[{"task": "score_shard[1]", "times": 1}]'),
    doc_md=__doc__,
    **COMMON,
):
    # per_region_restarts: each shard has its own restart budget (the failure count is per region).
    with FailoverPipeline(restart_strategy=RESTART_STRATEGY, per_region_restarts=True):
        SparkStageOperator.partial(
            task_id="score_shard", application=job("score_shard.py"), outputs=["shard_scores"], **SPARK
        ).expand(application_args=[[str(shard), str(SHARDS)] for shard in range(SHARDS)])
        SparkStageOperator(task_id="merge_shards", application=job("merge_shards.py"),
                           inputs=["shard_scores"], outputs=["sensor_totals"], **SPARK)
