"""The Spark Connect server is lost twice during a run; the run recovers, rebuilding only T1's region.

    S --s--> [ T1 ~~t1 (a view in the server)~~> T2 ] --t2--> U

1. T1 has published t1 as a view; the server is killed and restarted before T2 starts: T2 finds the
   view gone (PartitionNotFound before any work) and the region [T1, T2] restarts.
2. T2's second try is running (sleeping before its Spark work) when the server is killed and restarted
   again: T2 fails and the region restarts once more.
S's blocking partition survives in S3 both times: S runs once, and so does U.
"""

from __future__ import annotations

import time

import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.airflow.airflow_rest import try_numbers
from ft_harness.data.journal_records import stored_events
from ft_harness.services.spark_connect import SparkConnectServer
from tests.e2e.dags.ft_e2e_common import run_dir

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

DAG_ID = "ft_e2e_server_loss"


@pytest.fixture(scope="module")
def lost_server(live_airflow, tmp_path_factory):
    """A Spark Connect server of this test's own, known to Airflow as connection spark_connect_loss."""
    server = SparkConnectServer(log_dir=tmp_path_factory.mktemp("spark-connect-loss")).start()
    connection = {
        "connection_id": "spark_connect_loss",
        "conn_type": "spark_connect",
        "host": "sc://127.0.0.1",
        "port": server.port,
    }
    live_airflow.client.request("POST", "/api/v2/connections", json=connection, expect=(201, 409))
    yield server
    server.stop()


def test_losing_the_connect_server_restarts_only_the_pipelined_region(
    live_airflow, lost_server, s3_endpoint, e2e_store_url
):
    api = live_airflow.client
    live_airflow.wait_for_dags([DAG_ID], timeout=120)
    run_id = api.trigger_dag_run(DAG_ID, {})["dag_run_id"]
    story = lambda: live_airflow.describe_run(DAG_ID, run_id)  # noqa: E731

    # 1. between T1's publish and T2's read
    api.wait_for_task_instance(DAG_ID, run_id, "T1", states=["success"], timeout=600)
    lost_server.restart()
    go = run_dir(DAG_ID, run_id, root=live_airflow.scratch) / "go"
    go.parent.mkdir(parents=True, exist_ok=True)
    go.touch()
    # 2. while T2's second try runs (it sleeps 25 s before its Spark work)
    api.wait_for_task_instance(
        DAG_ID, run_id, "T2", states=["running"], predicate=lambda ti: ti["try_number"] == 2, timeout=600
    )
    deadline = time.monotonic() + 300
    while "sleeping 25 s before its Spark work" not in api.task_log(DAG_ID, run_id, "T2", 2):
        assert time.monotonic() < deadline, story()
        time.sleep(1)
    lost_server.restart()

    final = api.wait_for_dag_run(DAG_ID, run_id, timeout=900)
    assert final["state"] == "success", story()
    tis = api.task_instances(DAG_ID, run_id)
    assert try_numbers(tis) == {"S": 1, "T1": 3, "T2": 3, "U": 1, "gate": 1}, story()
    store = S3PartitionStore(s3_endpoint.client(), e2e_store_url)
    run = RunRef(DAG_ID, run_id)
    assert store.manifest(run.parse("s")).producer.try_number == 1  # the blocking partition survived
    rows = sorted((r["key"], r["value"]) for r in read_table(store, run.parse("u")).to_pylist())
    assert rows == [(key, key * 10 + 3) for key in range(40)]  # as a failure-free run
    causes = [e["cause"] for e in stored_events(RecoveryJournal(store, run)) if e["kind"] == "failover"]
    assert len(causes) == 2, causes
    assert causes[0].startswith("PartitionNotFound") and "no longer holds view" in causes[0], causes
    assert "PartitionNotFound" not in causes[1], causes  # the running stage lost its server
