"""What the example pipelines share: where their Spark applications are, the Spark settings for tiny
data, the run settings, and the fault-injection param. Not a pipeline itself (.airflowignore).

Importable as ``example_support`` because Airflow puts the DAG folder on ``sys.path`` when it parses
(DAG processor) and runs (worker) these files; copy it along with them.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import Param

# The Spark applications are in jobs/ next to this file (or where FT_EXAMPLES_JOBS points).
JOBS = Path(os.environ.get("FT_EXAMPLES_JOBS") or Path(__file__).resolve().parent / "jobs")
# Tiny data, one core, no Spark UI: each stage is one short local Spark application.
SPARK = {
    "conf": {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "1",
        "spark.default.parallelism": "1",
        "spark.driver.memory": "512m",
    }
}
# No schedule: runs start when triggered (UI, REST API, `airflow dags trigger`).
COMMON = {"schedule": None, "start_date": datetime(2026, 1, 1), "catchup": False, "tags": ["ft-example"]}


def job(name):
    path = JOBS / name
    if not path.is_file():
        raise FileNotFoundError(
            f"Spark application {path} not found: keep jobs/ next to this file "
            "or set FT_EXAMPLES_JOBS to the folder that holds it"
        )
    return str(path)


def fault_params(example):
    """Fault injection (airflow_ft_provider/faults/): empty by default; set it in "Trigger DAG"."""
    return {
        "ft_faults": Param(
            [],
            type="array",
            title="Injected faults",
            description=(
                "Acts only where [ft_provider] allow_fault_injection is True (test and demo deployments). "
                'Each item: {"task": "<stage> or <stage>[i]", "times": 1, "mode": "raise|app|kill", '
                '"delete": ["<partition id>"], "truncate": ["<partition id>"]}. Example: ' + example
            ),
        )
    }
