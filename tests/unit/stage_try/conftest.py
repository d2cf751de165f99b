"""The checkpointed-stage DAG of test_checkpointed_state.py and test_checkpointed_stream.py.

numbers (blocking, 8 files) --> stage (checkpointed: about one file per micro-batch)
"""

from __future__ import annotations

import json

import pytest
from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline
from tests.apps import checkpointed as apps


@pytest.fixture
def make_dag(s3_bucket, spark_connect, monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", s3_bucket.endpoint.aws_connection())
    monkeypatch.setenv("AIRFLOW_CONN_FT_STATE_CONNECT", json.dumps(spark_connect.connection()))
    monkeypatch.setenv("AIRFLOW_CONN_FT_STATE_SUBMIT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION", "True")
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__CHECKPOINT_LOCAL_DIR", str(tmp_path / "checkpoints"))
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__SPARK_CHECKPOINT_DIR", str(tmp_path / "spark-side"))

    def make(dag_id, app, output, data_path="staged", **keys):
        # a callable runs on the Connect server; a file (spark-submit) in a driver of its own
        runs = (
            {"application": app, "spark_conn_id": "ft_state_submit"}
            if isinstance(app, str)
            else {"python_callable": app}
        )
        with DAG(dag_id, schedule=None) as dag:
            with FailoverPipeline(
                store=s3_bucket.url,
                spark_conn_id="ft_state_connect",
                data_path=data_path,
                restart_strategy={
                    "restart-strategy.type": "fixed-delay",
                    "restart-strategy.fixed-delay.delay": "0 s",
                },
                checkpointing={"execution.checkpointing.interval-volume": "1 kb"},
            ):
                SparkStageOperator(
                    task_id="numbers", python_callable=apps.numbers, outputs=["numbers"], checkpointing=False
                )
                SparkStageOperator(
                    task_id="stage",
                    **runs,
                    conf={"spark.sql.shuffle.partitions": "2"},  # the state's partitions (200 by default)
                    inputs=["numbers"],
                    outputs=[output],
                    checkpointing={"execution.checkpointing.incremental": "true", **keys},
                )
        return dag

    return make
