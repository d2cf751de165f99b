"""Example: a pipeline written with @ft_stage, each stage a Python function of (spark, io, ...).

    [ make_events[0] ~~events[0]~~> clean_events[0] ] --cleaned[0]--+
                                                                     +--> user_totals
    [ make_events[1] ~~events[1]~~> clean_events[1] ] --cleaned[1]--+
          pipelined, pointwise (map index i feeds i)       blocking, all-to-all

The functions run in the worker against the Spark Connect session of ``spark_default`` (a
``spark_connect`` connection); nothing else differs from SparkStageOperator stages. Each shard's
pipelined pair is one failover region: when clean_events[1] fails, only make_events[1] and
clean_events[1] run again, and user_totals (not started yet) runs once.

Try: ``{"ft_faults": [{"task": "clean_events[1]", "times": 1}]}``.
"""

from airflow.sdk import DAG
from example_support import COMMON, SPARK, fault_params

from airflow_ft_provider.decorators import ft_stage
from airflow_ft_provider.pipeline import FailoverPipeline

SHARDS = 2


@ft_stage(outputs={"events": "pipelined"}, **SPARK)
def make_events(spark, io, shard, shards):
    """Every shards-th event from shard on: event id, user (0-6) and amount (0-99)."""
    from pyspark.sql import functions as F

    events = spark.range(shard, 1000, shards).select(
        F.col("id").alias("event"),
        (F.col("id") % 7).alias("user"),
        ((F.col("id") * 37) % 100).alias("amount"),
    )
    io.write("events", events)


@ft_stage(inputs={"events": "pointwise"}, outputs=["cleaned"], **SPARK)
def clean_events(spark, io, shard, min_amount):
    """Drop the small amounts; keep which shard a row came from."""
    from pyspark.sql import functions as F

    io.write(
        "cleaned", io.read("events").where(F.col("amount") >= min_amount).withColumn("shard", F.lit(shard))
    )


@ft_stage(inputs=["cleaned"], outputs=["user_totals"], **SPARK)
def user_totals(spark, io):
    from pyspark.sql import functions as F

    totals = (
        io.read("cleaned").groupBy("user").agg(F.count("*").alias("events"), F.sum("amount").alias("amount"))
    )
    io.write("user_totals", totals)


with DAG(
    "ft_example_decorated_stages",
    description="Stages written as Python functions with @ft_stage; one failing shard restarts alone",
    params=fault_params('[{"task": "clean_events[1]", "times": 1}]'),
    doc_md=__doc__,
    **COMMON,
):
    with FailoverPipeline(
        restart_strategy={
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "3 s",
        }
    ):
        make_events.partial(shards=SHARDS).expand(shard=list(range(SHARDS)))
        clean_events.partial(min_amount=10).expand(shard=list(range(SHARDS)))
        user_totals()
