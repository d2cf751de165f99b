"""Example: one failing stage under each of Flink's restart strategies, configured with Flink's keys.

    ft_example_restart_fixed_delay        fixed-delay:       3 attempts, 4 s apart
    ft_example_restart_exponential_delay  exponential-delay: 1 s, 2 s, 4 s, ... (max 10 s), no jitter
    ft_example_restart_failure_rate       failure-rate:      at most 3 failures per 5 min, 2 s apart

Each DAG has one stage, ``ingest``. Trigger with ``{"ft_faults": [{"task": "ingest", "times": 2}]}``
and compare the gaps between the tries in the UI (Task Instance -> tries / Gantt); with ``"times": 9``
every strategy eventually gives up and the log says which rule suppressed the restart.
The same keys go into ``[ft_provider]`` of airflow.cfg as the cluster-wide default.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

# The Spark applications are in jobs/ next to this file (or where FT_EXAMPLES_JOBS points).
JOBS = Path(os.environ.get("FT_EXAMPLES_JOBS") or Path(__file__).resolve().parent / "jobs")
# Tiny data, one core, no Spark UI: each stage is one short local Spark application.
SPARK = {"conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1",
                  "spark.default.parallelism": "1", "spark.driver.memory": "512m"}}
# No schedule: runs start when triggered (UI, REST API, `airflow dags trigger`).
COMMON = {"schedule": None, "start_date": datetime(2026, 1, 1), "catchup": False, "tags": ["ft-example"]}


def job(name):
    path = JOBS / name
    if not path.is_file():
        raise FileNotFoundError(f"Spark application {path} not found: keep jobs/ next to this file "
                                "or set FT_EXAMPLES_JOBS to the folder that holds it")
    return str(path)


def fault_params(example):
    """Fault injection (airflow_ft_provider/faults.py), off by default; set it in "Trigger DAG"."""
    return {"ft_faults": Param([], type="array", title="Injected faults", description=(
        'Each item: {"task": "<stage> or <stage>[i]", "times": 1, "mode": "raise|app|kill", '
        '"delete": ["<partition id>"], "truncate": ["<partition id>"]}. Example: ' + example))}

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
