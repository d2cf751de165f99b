"""The life-cycle pipeline (tests/e2e/test_lifecycle.py), in a file of its own.

A --a--> B: runs are kept 15 s after they end; B's one restart waits a minute, long enough to mark the
run successful by hand while B is up for retry.

Why a file of its own: the test waits for this DAG's success callback, which Airflow runs in the DAG
processor with the DAG file. A callback that arrives while its file is being parsed (for another DAG's
callback, say) stays pending until the file is next queued, up to ``min_file_process_interval`` later
(10 min in the live test Airflow). No other test's runs share this file.
"""

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

APP = str(Path(os.environ.get("FT_E2E_APPS", Path(__file__).resolve().parent.parent / "apps")) / "stage.py")
ONE_RESTART_A_MINUTE_LATER = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 1,
    "restart-strategy.fixed-delay.delay": "60 s",
}

with DAG(
    "ft_e2e_lifecycle",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"priority_weight": 100},  # ahead of other scenarios' tasks when worker slots are short
):
    with FailoverPipeline(restart_strategy=ONE_RESTART_A_MINUTE_LATER, retention="15 s"):
        for task_id, inputs in (("A", []), ("B", ["a"])):
            SparkStageOperator(
                task_id=task_id,
                application=APP,
                inputs=inputs,
                outputs=[task_id.lower()],
                conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"},
            )
