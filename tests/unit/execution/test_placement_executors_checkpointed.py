"""A checkpointed stage on the executors' data path with Spark on a host of its own
(``ft_harness/services/spark_host.py``: a private ``/tmp``, a standalone cluster and a Connect server):
its micro-batches are read and written by the executors, Spark's checkpoint stays on the Spark host,
and a retry resumes there. Nothing passes through the worker's disk or, beyond records, its network.

    numbers (blocking, 4 files of 64 hex characters a row) --> squares (checkpointed: one file per
                                                            micro-batch; fails inside micro-batch 2 once)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.pipeline import FailoverPipeline
from ft_harness.services.tcp_proxy import PausableProxy
from tests.apps import executor_path as apps
from tests.unit.stage_try.test_checkpointed import RUN_ID, run

pytestmark = [pytest.mark.s3, pytest.mark.spark]
SPARK_SIDE = "/tmp/ft-spark-side-checkpoints"  # a path on the Spark host (its /tmp is not ours)


def test_a_checkpointed_stage_on_another_host_resumes_there_and_the_worker_moves_records_only(
    s3_bucket, remote_spark, monkeypatch, request, tmp_path, caplog, capfd
):
    endpoint = s3_bucket.endpoint
    host, port = endpoint.url.removeprefix("http://").split(":")
    proxy = PausableProxy(host, int(port))
    request.addfinalizer(proxy.close)
    connection = json.loads(endpoint.aws_connection())
    connection["extra"].update(endpoint_url=proxy.url, executor_endpoint_url=endpoint.url)
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(connection))
    monkeypatch.setenv("AIRFLOW_CONN_FT_REMOTE_STREAM", json.dumps(remote_spark.connect.connection()))
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION", "True")
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__CHECKPOINT_LOCAL_DIR", str(tmp_path / "worker-disk"))
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__SPARK_CHECKPOINT_DIR", SPARK_SIDE)
    with DAG("ft_remote_checkpointed", schedule=None) as dag:
        with FailoverPipeline(
            store=s3_bucket.url,
            spark_conn_id="ft_remote_stream",
            data_path="executors",
            restart_strategy={
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.delay": "0 s",
            },
            checkpointing={"execution.checkpointing.interval-volume": "1 mb"},
        ):
            SparkStageOperator(
                task_id="numbers", python_callable=apps.numbers, outputs=["numbers"], checkpointing=False
            )
            SparkStageOperator(
                task_id="squares", python_callable=apps.squares, inputs=["numbers"], outputs=["squares"]
            )
    run(dag, "numbers", 1)
    before = proxy.sent + proxy.received
    with pytest.raises(Exception, match="injected failure inside micro-batch 2"):
        run(dag, "squares", 1, [{"task": "squares", "mode": "batch", "batch": 2}])
    pushed = run(dag, "squares", 2)
    worker_bytes = proxy.sent + proxy.received - before

    summary = pushed["squares"]["checkpoint"]
    assert (summary["why"], summary["restored_from"]) == ("resume", 1), summary  # 2 failed after writing
    store = dag.task_dict["squares"].store
    run_ref = RunRef(dag.dag_id, RUN_ID)
    table = read_table(store, run_ref.parse("squares")).to_pylist()
    assert sorted((r["id"], r["sq"]) for r in table) == [(i, i * i) for i in range(apps.ROWS)]
    assert len(store.manifest(run_ref.parse("squares")).files) == 4  # one object per micro-batch
    # Spark's checkpoint is on the Spark host, nothing of the stage on this one
    assert not (tmp_path / "worker-disk").exists()
    assert not Path(SPARK_SIDE).exists()
    there = remote_spark.host.path(f"{SPARK_SIDE}/ft_remote_checkpointed")
    committed = {p.name for p in there.rglob("commits/*") if not p.name.startswith(".")}
    assert {"0", "1", "2", "3"} <= committed, committed  # (later ones: the source counts on, reading nothing)
    # the data (read twice in part, written, copied) went between the executors and S3
    data = (
        store.manifest(run_ref.parse("numbers")).total_size
        + store.manifest(run_ref.parse("squares")).total_size
    )
    assert worker_bytes < 0.01 * data, (worker_bytes, data)
    secret = endpoint.secret_key
    printed = capfd.readouterr()
    assert secret not in printed.out + printed.err + caplog.text
    assert secret not in remote_spark.connect.log.read_text(errors="replace")
