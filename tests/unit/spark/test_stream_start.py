"""A complete-mode checkpointed stage on the staged path (an aggregation: ``foreachBatch`` in the Spark
Connect server; the executors' path has none) on a server whose Python processes start too slowly for
Spark's fixed 10 s connect-back, as on a busy machine: the stage's first try starts the query again and
succeeds, spending no try of the budget.

    numbers (blocking, 8 files) --> stage (checkpointed, output_mode="complete", data_path="staged")

The server's Python (``PYSPARK_PYTHON``) is a wrapper that holds the first foreachBatch process
13 s before it starts Python: Spark gives up on it at 10 s.
"""

from __future__ import annotations

import json
import sys

import pytest
from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.pipeline import FailoverPipeline
from ft_harness.services.spark_connect import SparkConnectServer
from tests.apps import checkpointed as apps
from tests.unit.stage_try.test_checkpointed import RUN_ID, run

pytestmark = [pytest.mark.s3, pytest.mark.spark]

SLOW_START = """#!/bin/sh
case "$*" in
  *foreach_batch_worker*)
    if [ ! -e {held} ]; then echo held > {held}; sleep 13; fi;;
esac
exec {python} "$@"
"""


@pytest.fixture
def slow_python_server(tmp_path):
    held = tmp_path / "held"
    wrapper = tmp_path / "slow-python.sh"
    wrapper.write_text(SLOW_START.format(held=held, python=sys.executable))
    wrapper.chmod(0o755)
    server = SparkConnectServer(log_dir=tmp_path / "spark", env={"PYSPARK_PYTHON": str(wrapper)})
    try:
        yield server.start(), held
    finally:
        server.stop()


def test_a_foreach_batch_process_that_misses_the_connect_back_costs_no_try(
    slow_python_server, s3_bucket, monkeypatch, tmp_path, caplog
):
    server, held = slow_python_server
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", s3_bucket.endpoint.aws_connection())
    monkeypatch.setenv("AIRFLOW_CONN_FT_SLOW_PYTHON", json.dumps(server.connection()))
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__CHECKPOINT_LOCAL_DIR", str(tmp_path / "checkpoints"))
    with DAG("ft_slow_python", schedule=None) as dag:
        with FailoverPipeline(store=s3_bucket.url, spark_conn_id="ft_slow_python", data_path="staged"):
            SparkStageOperator(
                task_id="numbers", python_callable=apps.numbers, outputs=["numbers"], checkpointing=False
            )
            SparkStageOperator(
                task_id="stage",
                python_callable=apps.totals,
                conf={"spark.sql.shuffle.partitions": "2"},
                inputs=["numbers"],
                outputs=["totals"],
                checkpointing={"execution.checkpointing.interval-volume": "1 kb"},
            )
    run(dag, "numbers", 1)
    with caplog.at_level("WARNING", logger="airflow_ft_provider.spark.stream_start"):
        pushed = run(dag, "stage", 1)  # try 1 succeeds: run() raises otherwise

    assert held.exists()  # the first foreachBatch process was held past Spark's 10 s
    # On a loaded machine a later start may miss the connect-back too (unheld): each is retried in turn.
    warnings = [r.getMessage() for r in caplog.records if "did not connect back" in r.getMessage()]
    assert 1 <= len(warnings) <= 3
    for number, warning in enumerate(warnings, start=1):
        assert f"attempt {number} of 4" in warning and "nothing ran" in warning
    assert pushed["totals"]["rows"] == 13
    table = read_table(dag.task_dict["stage"].store, RunRef(dag.dag_id, RUN_ID).parse("totals")).to_pylist()
    assert sorted((r["k"], r["total"], r["count(1)"]) for r in table) == apps.expected_totals()
