"""Example: one failing stage under each of Flink's restart strategies, configured with Flink's keys.

    ft_example_restart_fixed_delay        fixed-delay:       3 attempts, 4 s apart
    ft_example_restart_exponential_delay  exponential-delay: 1 s, 2 s, 4 s, ... (max 10 s), no jitter
    ft_example_restart_failure_rate       failure-rate:      at most 3 failures per 5 min, 2 s apart

Each DAG has one stage, ``ingest``. Trigger with ``{"ft_faults": [{"task": "ingest", "times": 2}]}``
and compare the gaps between the tries in the UI (Task Instance -> tries / Gantt); with ``"times": 9``
every strategy eventually gives up and the log says which rule suppressed the restart.
The same keys go into ``[ft_provider]`` of airflow.cfg as the cluster-wide default.
"""

from airflow.sdk import DAG
from example_support import COMMON, SPARK, fault_params, job

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

STRATEGIES = {
    "fixed_delay": {
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "4 s",
    },
    "exponential_delay": {
        "restart-strategy.type": "exponential-delay",
        "restart-strategy.exponential-delay.initial-backoff": "1 s",
        "restart-strategy.exponential-delay.backoff-multiplier": "2.0",
        "restart-strategy.exponential-delay.max-backoff": "10 s",
        "restart-strategy.exponential-delay.jitter-factor": "0.0",
        "restart-strategy.exponential-delay.reset-backoff-threshold": "1 h",
        "restart-strategy.exponential-delay.attempts-before-reset-backoff": "5",
    },
    "failure_rate": {
        "restart-strategy.type": "failure-rate",
        "restart-strategy.failure-rate.max-failures-per-interval": "3",
        "restart-strategy.failure-rate.failure-rate-interval": "5 min",
        "restart-strategy.failure-rate.delay": "2 s",
    },
}

for name, strategy in STRATEGIES.items():
    with DAG(
        f"ft_example_restart_{name}",
        description=f"The same failing stage under the {strategy['restart-strategy.type']} restart strategy",
        params=fault_params('[{"task": "ingest", "times": 2}]'),
        doc_md=__doc__,
        **COMMON,
    ):
        with FailoverPipeline(restart_strategy=strategy):
            SparkStageOperator(task_id="ingest", application=job("ingest.py"), outputs=["ingested"], **SPARK)
