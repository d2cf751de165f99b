"""DAGs of bench/bench_output_reuse.py: one pipeline twice, with and without output reuse.

    extract --orders--> agg_1 .. agg_4        (all blocking, each a stage on the Spark Connect server)

extract writes the same rows every time it runs (deterministic); each agg_i aggregates them its own
way. bench_reuse_on keeps the default (``reuse="within-run"``); bench_reuse_off sets ``reuse="off"`` on
every stage, so a restarted extract makes the four aggregations run Spark again.
"""

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

ROWS = int(os.environ.get("FT_BENCH_REUSE_ROWS", "2000000"))
COMMON = {
    "schedule": None,
    "start_date": datetime(2026, 1, 1),
    "catchup": False,
    "max_active_tasks": 2,  # two stages at a time on the 2-core machine
    "tags": ["ft-bench"],
}
CONF = {"spark.sql.shuffle.partitions": "2"}


def extract(spark, io, rows):
    from pyspark.sql import functions as F

    orders = spark.range(int(rows)).select(
        F.col("id").alias("order_id"),
        (F.col("id") % 1000).alias("customer"),
        (F.col("id") % 97 * 1.5).alias("amount"),
        (F.col("id") % 365).alias("day"),
    )
    io.write("orders", orders)


def aggregate(spark, io, key):
    from pyspark.sql import functions as F

    orders = io.read("orders")
    io.write(f"by_{key}", orders.groupBy(key).agg(F.sum("amount").alias("total"), F.count("*").alias("n")))


for dag_id, reuse in (("bench_reuse_on", "within-run"), ("bench_reuse_off", "off")):
    with DAG(dag_id, **COMMON):
        with FailoverPipeline(restart_strategy={"restart-strategy.type": "none"}):
            source = SparkStageOperator(
                task_id="extract",
                python_callable=extract,
                application_args=[ROWS],
                outputs=["orders"],
                conf=CONF,
                reuse=reuse,
            )
            for i, key in enumerate(("customer", "day", "amount", "order_id"), start=1):
                SparkStageOperator(
                    task_id=f"agg_{i}",
                    python_callable=aggregate,
                    application_args=[key],
                    inputs=["orders"],
                    outputs=[f"by_{key}"],
                    conf=CONF,
                    reuse=reuse,
                )
