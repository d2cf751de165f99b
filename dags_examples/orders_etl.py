"""Example: an orders ETL with four failover regions, one of them a pipelined region of two stages.

    generate_orders --raw_orders--> [ clean_orders ~~cleaned_orders~~> enrich_orders ] --enriched_orders--+--> daily_revenue
       (blocking)                          (pipelined: same region)                   (blocking)          +--> customer_aggregates

Regions: {generate_orders}, {clean_orders, enrich_orders} (the TaskGroup ``region_clean_orders``),
{daily_revenue}, {customer_aggregates}: the A -> B -> {C, D} shape of Flink's backtracking example.

Try it (Trigger DAG w/ config, or ``airflow dags trigger ft_example_orders_etl --conf '...'``):
* ``{"ft_faults": [{"task": "enrich_orders"}]}``: enrich fails once; clean and enrich restart together
  (their exchange is pipelined), raw_orders is re-read from S3, nothing else runs again.
* ``{"ft_faults": [{"task": "customer_aggregates", "delete": ["enriched_orders"]}]}``: a data file of
  enriched_orders is lost; customer_aggregates fails with PartitionNotFound, the region that produced
  it is restarted (backtracking) and so are both consumers, while raw_orders is re-used.
"""  # noqa: E501  (a drawing)

from airflow.sdk import DAG
from example_support import COMMON, SPARK, fault_params, job

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

# Flink's exponential-delay restart strategy: 2 s, 4 s, 8 s, ... (max 30 s), at most 10 restarts
# before the backoff resets.
RESTART_STRATEGY = {
    "restart-strategy.type": "exponential-delay",
    "restart-strategy.exponential-delay.initial-backoff": "2 s",
    "restart-strategy.exponential-delay.backoff-multiplier": "2.0",
    "restart-strategy.exponential-delay.max-backoff": "30 s",
    "restart-strategy.exponential-delay.jitter-factor": "0.1",
    "restart-strategy.exponential-delay.attempts-before-reset-backoff": "10",
}

with DAG(
    "ft_example_orders_etl",
    description="Orders ETL: a pipelined region and a fan-out; inject faults with the ft_faults param",
    params=fault_params('[{"task": "customer_aggregates", "delete": ["enriched_orders"]}]'),
    doc_md=__doc__,
    **COMMON,
):
    with FailoverPipeline(restart_strategy=RESTART_STRATEGY):
        SparkStageOperator(
            task_id="generate_orders", application=job("generate_orders.py"), outputs=["raw_orders"], **SPARK
        )
        SparkStageOperator(
            task_id="clean_orders",
            application=job("clean_orders.py"),
            inputs=["raw_orders"],
            outputs={"cleaned_orders": "pipelined"},
            **SPARK,
        )
        SparkStageOperator(
            task_id="enrich_orders",
            application=job("enrich_orders.py"),
            inputs=["cleaned_orders"],
            outputs=["enriched_orders"],
            **SPARK,
        )
        SparkStageOperator(
            task_id="daily_revenue",
            application=job("daily_revenue.py"),
            inputs=["enriched_orders"],
            outputs=["daily_revenue"],
            **SPARK,
        )
        SparkStageOperator(
            task_id="customer_aggregates",
            application=job("customer_aggregates.py"),
            inputs=["enriched_orders"],
            outputs=["customer_aggregates"],
            **SPARK,
        )
