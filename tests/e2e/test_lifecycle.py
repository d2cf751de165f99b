"""The life cycle that runs itself, in the live Airflow: a run marked successful by hand gets no DAG
callback, yet a later run's end releases it one retention after Airflow says it ended (run_end.py asks
the REST API); the live Airflow sweeps at every run end (``partition_store_sweep_interval = 0 s``).

ft_e2e_lifecycle keeps its runs 15 s (``FailoverPipeline(retention="15 s")``)."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

DAG_ID = "ft_e2e_lifecycle"
DAG_FILE = "ft_e2e_lifecycle.py"
RETENTION = 15.0


def test_a_run_marked_successful_by_hand_is_released_by_a_later_runs_end(
    live_airflow, s3_endpoint, e2e_store_url, statsd_listener
):
    store = S3PartitionStore(s3_endpoint.client(), e2e_store_url)
    api = live_airflow.client
    live_airflow.wait_for_dags({DAG_ID}, timeout=120)
    stamp = datetime.now().strftime("%H%M%S%f")
    by_hand, after = RunRef(DAG_ID, f"by_hand__{stamp}"), RunRef(DAG_ID, f"after__{stamp}")

    # A commits a; B fails once and waits a minute to restart: marked successful by hand meanwhile
    api.trigger_dag_run(DAG_ID, {"ft_faults": [{"task": "B", "times": 1}]}, run_id=by_hand.run_id)
    api.wait_for_task_instance(DAG_ID, by_hand.run_id, "B", states={"up_for_retry", "deferred"}, timeout=300)
    assert store.manifest(by_hand.parse("a")) is not None
    api.request("PATCH", f"/api/v2/dags/{DAG_ID}/dagRuns/{by_hand.run_id}", json={"state": "success"})
    marked = api.get_dag_run(DAG_ID, by_hand.run_id)
    assert marked["state"] == "success" and marked["end_date"], marked
    ended_by_hand = datetime.fromisoformat(marked["end_date"]).timestamp()

    # Wait out the retention, then a run that ends by itself: its end sweeps the pipeline
    time.sleep(max(0.0, ended_by_hand + RETENTION + 1 - time.time()))
    run_markers = store.layout.run_prefix(by_hand) + "_run/"
    assert not store.modified_times(run_markers), "Airflow gave the hand-marked run a callback after all"
    api.trigger_dag_run(DAG_ID, {"ft_faults": []}, run_id=after.run_id)
    assert api.wait_for_dag_run(DAG_ID, after.run_id, timeout=300)["state"] == "success"

    released = store.layout.marker_key(by_hand, "released")
    wait_for_the_sweep(live_airflow, store, run_markers, released, after)
    assert store.check_availability(DAG_ID, by_hand.run_id, ["a"]).unavailable_ids == {"a"}
    # the run that just ended keeps its partitions for its own retention, which its end marker records
    assert store.check_availability(DAG_ID, after.run_id, ["a", "b"]).available == {"a", "b"}
    # its end indexed its manifests (run_end.py), before the sweep: `airflow-ft partitions` reads one object
    index = store.indexes.read(after)
    assert index is not None and set(index.entries) == {
        store.objects.blocking(after.parse(p)).manifest_key for p in ("a", "b")
    }
    ended = store.json_objects.get_bytes(store.layout.marker_key(after, "ended"))
    assert ended is not None and b'"retention": 15.0' in ended.value and b'"succeeded": true' in ended.value
    released_metric = statsd_listener.wait_for(
        lambda seen: any(
            m.name == "airflow.ft.runs.released" and m.tags.get("dag_id") == DAG_ID for m in seen
        ),
        timeout=60,
    )
    assert (
        sum(
            m.value
            for m in released_metric
            if m.name == "airflow.ft.runs.released" and m.tags.get("dag_id") == DAG_ID
        )
        >= 1
    )


def wait_for_the_sweep(live_airflow, store, run_markers, released, after) -> None:
    """Wait for ``released`` to appear: ``after``'s success callback runs in the DAG processor a little
    after the run ends. Should the callback not have run within 30 s, the DAG file is queued again
    (``requeue_dag_file``: Airflow may hold a callback until then); what the callback logged is in the
    failure message."""
    start = time.monotonic()
    requeued = False
    while released not in store.modified_times(run_markers):
        log = live_airflow.dag_processor_log(DAG_FILE)
        if not requeued and time.monotonic() - start > 30 and f"{DAG_ID}/{after.run_id}" not in log:
            live_airflow.requeue_dag_file(DAG_FILE)
            requeued = True
        assert time.monotonic() - start < 120, (
            f"s3://{store.bucket}/{released} never appeared (DAG file queued again: {requeued}); "
            f"the DAG processor's log of {DAG_FILE}:\n" + "\n".join(log.splitlines()[-40:])
        )
        time.sleep(1)
