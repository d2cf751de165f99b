"""Reuse needs unchanged inputs: a producer that writes different rows when it re-runs makes its
consumer run Spark again (the other half, identical rows reused, is in test_region_failover.py's manual
region restart).

ft_e2e_reuse_noisy: P (a random column) --p--> Q. After a failure-free run, P's region is restarted by
hand: P writes new rows, so Q's new try computes its output again.

ft_e2e_reuse_across (``reuse="across-runs"``): a second run copies the first run's output of Q. Off by
default and invalidated by a changed application file: tests/unit/stage_try/test_reuse_decision.py."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.data.journal_records import stored_events

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

DAG_ID = "ft_e2e_reuse_noisy"


def test_a_producer_that_writes_different_rows_makes_its_consumer_run_again(
    live_airflow, s3_endpoint, e2e_store_url
):
    store = S3PartitionStore(s3_endpoint.client(), e2e_store_url)
    api = live_airflow.client
    live_airflow.wait_for_dags({DAG_ID}, timeout=120)
    run_id = f"noisy__{datetime.now().strftime('%H%M%S%f')}"
    run = RunRef(DAG_ID, run_id)
    api.trigger_dag_run(DAG_ID, {"ft_faults": []}, run_id=run_id)
    assert api.wait_for_dag_run(DAG_ID, run_id, timeout=600)["state"] == "success"
    before = {name: store.manifest(run.parse(name)) for name in ("p", "q")}

    restart = live_airflow.provider_cli(
        "restart-region", "--dag-id", DAG_ID, "--run-id", run_id, "--task", "P"
    )
    assert restart.returncode == 0, restart.stdout + restart.stderr
    assert json.loads(restart.stdout) == {"task": "P", "restarted": ["P", "Q"]}
    api.wait_for_task_instance(
        DAG_ID,
        run_id,
        "Q",
        predicate=lambda ti: ti["try_number"] > 1 and ti["state"] == "success",
        timeout=600,
    )
    after = {name: store.manifest(run.parse(name)) for name in ("p", "q")}
    story = live_airflow.describe_run(DAG_ID, run_id)
    assert after["p"].provenance.content != before["p"].provenance.content, story  # P's rows changed
    assert after["q"].provenance.lineage != before["q"].provenance.lineage, story
    assert after["q"].producer.try_number == 2 and after["q"].attempt_id.startswith("t2-"), story
    q_log = live_airflow.task_log(DAG_ID, run_id, "Q", 2)
    assert "stage Q (spark-connect" in q_log and "reused" not in q_log, q_log[-3000:]
    assert not [e for e in stored_events(RecoveryJournal(store, run)) if e["kind"] == "reused"]


def test_across_runs_a_second_run_copies_what_the_first_computed_from_the_same_rows(
    live_airflow, s3_endpoint, e2e_store_url
):
    """ft_e2e_reuse_across (reuse="across-runs"): P writes the same rows every run, so the second run's
    Q copies the first run's q instead of running Spark; P, a source, always runs."""
    dag_id = "ft_e2e_reuse_across"
    store = S3PartitionStore(s3_endpoint.client(), e2e_store_url)
    api = live_airflow.client
    live_airflow.wait_for_dags({dag_id}, timeout=120)
    stamp = datetime.now().strftime("%H%M%S%f")
    runs = [RunRef(dag_id, f"across_{n}__{stamp}") for n in (1, 2)]
    for run in runs:
        api.trigger_dag_run(dag_id, {"ft_faults": []}, run_id=run.run_id)
        assert api.wait_for_dag_run(dag_id, run.run_id, timeout=600)["state"] == "success"
    first, second = ({name: store.manifest(run.parse(name)) for name in ("p", "q")} for run in runs)
    story = live_airflow.describe_run(dag_id, runs[1].run_id)
    assert second["p"].provenance.content == first["p"].provenance.content, story
    assert second["q"].provenance == first["q"].provenance, story
    assert second["q"].attempt_id != first["q"].attempt_id and second["q"].run_id == runs[1].run_id
    q_log = live_airflow.task_log(dag_id, runs[1].run_id, "Q", 1)
    said = f"inputs and code identical to run {runs[0].run_id}'s: its output copied, Spark not started"
    assert said in q_log and "stage Q (spark-connect" not in q_log, q_log[-3000:]
    assert "stage P (spark-connect" in live_airflow.task_log(dag_id, runs[1].run_id, "P", 1)
    assert [e["kind"] for e in stored_events(RecoveryJournal(store, runs[1]))] == ["reused"]
