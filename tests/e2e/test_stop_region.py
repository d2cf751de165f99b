"""A failure a restart cannot heal fails the rest of its region at once (recovery/decide.py,
hooks/region_stop.py): shard[0] has a code bug while shard[1], in the same pipelined region, would
work for two minutes more; it is failed within seconds, and combine never runs."""

from __future__ import annotations

from datetime import datetime

import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.data.journal_records import stored_events

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

DAG_ID = "ft_e2e_stop_region"


def test_a_code_bug_stops_the_other_tasks_of_its_region_at_once(
    live_airflow, s3_endpoint, e2e_store_url, statsd_listener
):
    api = live_airflow.client
    live_airflow.wait_for_dags({DAG_ID}, timeout=120)
    run_id = f"stop_region__{datetime.now().strftime('%H%M%S%f')}"
    api.trigger_dag_run(DAG_ID, {"ft_faults": []}, run_id=run_id)
    run = api.wait_for_dag_run(DAG_ID, run_id, timeout=300)
    story = live_airflow.describe_run(DAG_ID, run_id)
    assert run["state"] == "failed", story
    tis = {(ti["task_id"], ti["map_index"]): ti for ti in api.task_instances(DAG_ID, run_id)}
    assert tis[("shard", 0)]["state"] == "failed" and tis[("shard", 0)]["try_number"] == 1, story
    slow = tis[("shard", 1)]
    # failed by the stop, long before its two minutes of work were over (and never retried)
    assert slow["state"] == "failed" and slow["try_number"] == 1, story
    started, ended = (datetime.fromisoformat(slow[k]) for k in ("start_date", "end_date"))
    assert (ended - started).total_seconds() < 90, story
    assert tis[("combine", -1)]["state"] in ("failed", "upstream_failed"), story
    assert tis[("combine", -1)]["try_number"] == 0, story  # it never ran
    store = S3PartitionStore(s3_endpoint.client(), e2e_store_url)
    events = stored_events(RecoveryJournal(store, RunRef(DAG_ID, run_id)))
    [event] = [e for e in events if e.get("kind") == "failover"]
    assert event["task"] == "shard[0]" and event["restart"] is False, event
    assert event["stopped"] == ["combine", "shard[1]"], event
    assert "stopped the rest of its region" in event["reason"], event
    metrics = statsd_listener.wait_for(
        lambda seen: any(
            m.name == "airflow.ft.regions_stopped_tasks" and m.tags.get("dag_id") == DAG_ID for m in seen
        ),
        timeout=60,
    )
    [stopped] = [
        m for m in metrics if m.name == "airflow.ft.regions_stopped_tasks" and m.tags["dag_id"] == DAG_ID
    ]
    assert (stopped.value, stopped.tags["task_id"]) == (2, "shard_0_"), stopped


def test_with_every_default_a_key_error_fails_within_two_tries_and_a_minute(
    live_airflow, s3_endpoint, e2e_store_url
):
    """A Python bug (``PRICES["banana"]``) in a FailoverPipeline() with every setting at its default: the
    run ends failed within two tries and a minute, with the bug in the message, and the rest of its
    region (priced[1], two minutes of work) is stopped."""
    dag_id = "ft_e2e_defaults_key_error"
    api = live_airflow.client
    live_airflow.wait_for_dags({dag_id}, timeout=120)
    run_id = f"key_error__{datetime.now().strftime('%H%M%S%f')}"
    api.trigger_dag_run(dag_id, {}, run_id=run_id)
    run = api.wait_for_dag_run(dag_id, run_id, timeout=240)
    story = live_airflow.describe_run(dag_id, run_id)
    assert run["state"] == "failed", story
    tis = {(ti["task_id"], ti["map_index"]): ti for ti in api.task_instances(dag_id, run_id)}
    bug = tis[("priced", 0)]
    assert bug["state"] == "failed" and bug["try_number"] <= 2, story
    started = datetime.fromisoformat(bug["start_date"])
    ended = max(datetime.fromisoformat(ti["end_date"]) for ti in tis.values() if ti.get("end_date"))
    assert (ended - started).total_seconds() < 60, story
    assert tis[("priced", 1)]["state"] == "failed" and tis[("priced", 1)]["try_number"] == 1, story
    assert tis[("total", -1)]["try_number"] == 0, story  # it never ran
    store = S3PartitionStore(s3_endpoint.client(), e2e_store_url)
    [event] = [
        e
        for e in stored_events(RecoveryJournal(store, RunRef(dag_id, run_id)))
        if e.get("kind") == "failover"
    ]
    assert event["task"] == "priced[0]" and event["restart"] is False, event
    assert "KeyError" in event["cause"] and "banana" in event["cause"], event
    assert "KeyError is a programming error" in event["reason"], event
    assert "priced[1]" in event["stopped"], event
