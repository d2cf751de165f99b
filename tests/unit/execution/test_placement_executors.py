"""The executors' data path with real Spark, under spark-submit and on a Spark Connect server: Spark's
executors read and write the partition store themselves, and the Airflow worker moves manifests only.

Spark runs on a host of its own (``ft_harness/services/spark_host.py``: a mount namespace with a private
``/tmp`` and no checkout of this repository), a standalone cluster and a Connect server on it: under
spark-submit the driver is here (client mode) and the executors there; on Connect both are there. So
nothing here can pass through a shared disk.

    numbers --numbers (blocking)--> doubled --doubled (pipelined)--> totals

The worker reaches S3 through a counting proxy (its ``aws`` connection), the executors directly (the
connection's ``executor_endpoint_url``): the proxy sees every byte the worker moves.
"""

from __future__ import annotations

import base64
import json
import re
import types
from pathlib import Path

import pytest
from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.pipeline import FailoverPipeline
from ft_harness.services.tcp_proxy import PausableProxy
from tests.apps import executor_path as apps

pytestmark = [pytest.mark.s3, pytest.mark.spark]
RUN_ID = "manual__2026-11-26T08:00:00+00:00"
APP = str(Path(__file__).resolve().parents[2] / "apps" / "executor_path.py")
EXECUTOR_FILE = re.compile(r"attempts/t1-[0-9a-f]{16}/part-\d{5}-a\d+-[0-9a-f]{12}\.parquet")


class TaskInstance(types.SimpleNamespace):
    def xcom_push(self, key, value):
        self.pushed[key] = value

    def xcom_pull(self, **kwargs):
        return None


def stage_kwargs(backend, name, events):
    if backend == "spark-connect":
        return {"python_callable": getattr(apps, name)}
    return {
        "application": APP,
        "application_args": [name],
        "spark_conn_id": "ft_executors_submit",
        # what Spark's UI shows (the environment, every plan), kept for the grep below
        "conf": {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false",  # to grep it
        },
    }


def spark_properties(event_log_dir):
    """Each application's Spark properties, from its event log (what the UI's Environment tab shows)."""
    for path in sorted(event_log_dir.rglob("events_*")):  # rolling logs: appstatus_* files are empty
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["Event"] == "SparkListenerEnvironmentUpdate":
                yield dict(event["Spark Properties"])


@pytest.mark.parametrize("backend", ["spark-submit", "spark-connect"])
def test_executors_move_the_data_and_the_worker_only_manifests(
    backend, s3_bucket, remote_spark, monkeypatch, request, tmp_path, caplog, capfd
):
    spark_connect = remote_spark.connect
    endpoint = s3_bucket.endpoint
    events = tmp_path / "events"
    events.mkdir()
    host, port = endpoint.url.removeprefix("http://").split(":")
    proxy = PausableProxy(host, int(port))
    request.addfinalizer(proxy.close)
    connection = json.loads(endpoint.aws_connection())
    connection["extra"].update(endpoint_url=proxy.url, executor_endpoint_url=endpoint.url)
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(connection))
    monkeypatch.setenv("AIRFLOW_CONN_FT_EXECUTORS_CONNECT", json.dumps(spark_connect.connection()))
    monkeypatch.setenv(
        "AIRFLOW_CONN_FT_EXECUTORS_SUBMIT",
        json.dumps({"conn_type": "spark", "host": remote_spark.cluster.url}),
    )
    with DAG("ft_executor_path", schedule=None) as dag:
        with FailoverPipeline(
            store=s3_bucket.url,
            spark_conn_id="ft_executors_connect",
            data_path="executors",
            restart_strategy={"restart-strategy.type": "none"},
        ):
            SparkStageOperator(
                task_id="numbers", outputs=["numbers"], **stage_kwargs(backend, "numbers", events)
            )
            SparkStageOperator(
                task_id="doubled",
                inputs=["numbers"],
                outputs={"doubled": "pipelined"},
                **stage_kwargs(backend, "doubled", events),
            )
            SparkStageOperator(
                task_id="totals",
                inputs=["doubled"],
                outputs=["totals"],
                **stage_kwargs(backend, "totals", events),
            )
    for task_id in ("numbers", "doubled", "totals"):
        ti = TaskInstance(map_index=-1, try_number=1, pushed={}, task_id=task_id, dag_id=dag.dag_id)
        context = {"ti": ti, "dag": dag, "run_id": RUN_ID, "dag_run": None, "params": {}}
        dag.task_dict[task_id].execute(context)
    worker_bytes = proxy.sent + proxy.received

    run = RunRef("ft_executor_path", RUN_ID)
    store = dag.task_dict["totals"].store
    numbers = store.manifest(run.parse("numbers"))
    # One object per Spark task, named by the executor that wrote it, with its checksum and rows
    assert len(numbers.files) == 4 and all(EXECUTOR_FILE.fullmatch(f.key) for f in numbers.files)
    assert numbers.row_count == apps.ROWS
    totals = {r["k"]: (r["total"], r["n"]) for r in read_table(store, run.parse("totals")).to_pylist()}
    assert totals == {
        k: (sum(2 * i for i in range(k, apps.ROWS, 7)), len(range(k, apps.ROWS, 7))) for k in range(7)
    }
    # The data went between the executors and S3: numbers written once and read once (plus doubled's
    # S3 scratch under spark-submit); through the worker, only manifests, records and the journal.
    data = 2 * numbers.total_size
    assert worker_bytes < 0.01 * data, (worker_bytes, data)

    # The connection's secret reached the executors (they wrote with it) and nothing else: not the task
    # log, not Spark's event log (its UI) nor the stage spec in its conf, not the Connect server's log,
    # not the store.
    secret = endpoint.secret_key
    printed = capfd.readouterr()
    assert secret not in printed.out + printed.err + caplog.text
    if backend == "spark-submit":
        applications = list(spark_properties(events))
        assert len(applications) == 3
        for properties in applications:
            assert secret not in json.dumps(properties)
            assert secret not in base64.b64decode(properties["spark.airflow_ft.stage_spec"]).decode()
        logged = "".join(p.read_text() for p in events.rglob("events_*"))
        assert "write_partition_objects" in logged and secret not in logged  # the writes' plans: no secret
    else:
        assert secret not in spark_connect.log.read_text(errors="replace")
    client = s3_bucket.client()
    for key in s3_bucket.keys():
        assert secret.encode() not in client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()


def test_the_staged_path_with_spark_on_another_host_fails_once_and_says_what_to_set(
    s3_bucket, remote_spark, monkeypatch
):
    #   numbers (data_path "staged", on the Connect server of the Spark host: its disk is not ours)
    from airflow_ft_provider.model.data_path import SparkElsewhere

    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", s3_bucket.endpoint.aws_connection())
    monkeypatch.setenv("AIRFLOW_CONN_FT_REMOTE_CONNECT", json.dumps(remote_spark.connect.connection()))
    with DAG("ft_staged_elsewhere", schedule=None) as dag:
        with FailoverPipeline(store=s3_bucket.url, spark_conn_id="ft_remote_connect", data_path="staged"):
            SparkStageOperator(task_id="numbers", outputs=["numbers"], python_callable=apps.numbers)
    ti = TaskInstance(map_index=-1, try_number=1, pushed={}, task_id="numbers", dag_id=dag.dag_id)
    with pytest.raises(SparkElsewhere, match="not on this worker's disk") as failed:
        dag.task_dict["numbers"].execute(
            {"ti": ti, "dag": dag, "run_id": RUN_ID, "dag_run": None, "params": {}}
        )
    assert "[ft_provider] data_path = executors" in str(failed.value)
    labels = dag.task_dict["numbers"].pipeline.failure_labels("numbers", failed.value)
    assert not labels.recoverable  # every try would fail the same way: no restart
    assert not [key for key in s3_bucket.keys() if key.endswith("/manifest.json")]  # nothing published
