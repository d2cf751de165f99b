"""Scenarios 2-6: failures only a distributed deployment has -- a lost Celery worker (during a region's
work, and in the middle of a Spark Connect write), a lost Spark worker, a restarted scheduler, a
triggerer down, an unreachable REST API -- each run alone on the reference deployment, each checked for
the exact try number of every task instance and for output equal to a failure-free run's.

    S --s--> [ T1 ~~t1 (pipelined)~~> T2 ] --t2--> U        (ft_cluster_worker_loss, _api_outage,
                                                            _triggerer_loss)
    F --f--> G                                             (ft_cluster_backoff)
    W --w-->                                               (ft_cluster_running_write: a 60 s write)
    V --v-->                                               (ft_cluster_spark_worker_loss: a 40 s write)
    make_samples --samples--> scale_slowly (checkpointed)   (ft_cluster_checkpoint_worker_loss, and
                                                            ft_cluster_checkpoint_spark_worker_loss)
"""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import datetime

import pytest

from airflow_ft_provider.checkpoints.store_copy import StoreCheckpoints
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.spark.object_stream import task_markers
from ft_harness.airflow.airflow_rest import try_numbers
from ft_harness.data.journal_records import stored_events
from tests.cluster.dags.ft_cluster_scenarios import LEDGERS
from tests.e2e.test_region_failover import (  # noqa: F401  (store: a fixture)
    expected,
    finish,
    producer_try,
    store,
    values,
)

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3, pytest.mark.timeout(900)]


def trigger(airflow, dag_id, conf=None):
    airflow.wait_for_dags([dag_id], timeout=120)
    run_id = f"{dag_id}__{datetime.now():%H%M%S}"
    airflow.client.trigger_dag_run(dag_id, conf or {"ft_faults": []}, run_id=run_id)
    return dag_id, run_id


def wait_until_running(airflow, dag_id, run_id, task_id):
    """The task instance once it runs on a worker (its ``hostname`` names the worker)."""
    return airflow.client.wait_for_task_instance(
        dag_id,
        run_id,
        task_id,
        predicate=lambda ti: ti["state"] == "running" and ti.get("hostname"),
        timeout=300,
    )


def tries(airflow, dag_id, run_id, task_id):
    return airflow.client.task_instance_tries(dag_id, run_id, task_id)


def when(text):
    return datetime.fromisoformat(text).timestamp()


def ledger_entries(deployment, run_id):
    """What a slow write's ledger says (on the Spark host's disk): ``try:pid:end time`` per Spark task
    that computed it, sorted; the ledger is removed once read."""
    ledger = deployment.spark_host.path(os.path.join(LEDGERS, run_id))
    computed = sorted(ledger.read_text().split()) if ledger.exists() else []
    ledger.unlink(missing_ok=True)
    return computed


def journal_events(store, dag_id, run_id):
    return stored_events(RecoveryJournal(store, RunRef(dag_id, run_id)))


def test_a_lost_celery_worker_restarts_its_region_on_the_other_worker(deployment, store):
    airflow = deployment.airflow
    dag_id, run_id = trigger(airflow, "ft_cluster_worker_loss")
    running = wait_until_running(airflow, dag_id, run_id, "T2")
    lost = airflow.worker(running["hostname"])
    t1_host = tries(airflow, dag_id, run_id, "T1")[0]["hostname"]
    time.sleep(3)  # well inside T2's first try (it sleeps 300 s before its Spark work)
    killed_at = time.time()
    killed = airflow.kill_worker(lost)  # the worker, its pool, the task supervisor and the task process
    try:
        run, tis, story = finish(airflow, {"r": (dag_id, run_id)}, "r", timeout=600)
    finally:
        airflow.start_worker(lost)  # whole again for the scenarios after this one
    assert len(killed) >= 3, killed
    assert run["state"] == "success", story
    # T2's lost try 1 is found by the heartbeat timeout; its try 2 applies the failover (the region:
    # T1 and T2) and, since T1 runs again first, lets itself go; try 3 does the work.
    assert try_numbers(tis.values()) == {"S": 1, "T1": 2, "T2": 3, "U": 1}, story
    events = {e["event"] for e in airflow.client.event_logs(dag_id, run_id=run_id, task_id="T2")}
    assert "heartbeat timeout" in events, events
    # Everything after the loss ran on the other worker.
    survivor = next(w for w in airflow.workers if w is not lost).address
    assert [t["hostname"] for t in tries(airflow, dag_id, run_id, "T2")[1:]] == [survivor, survivor], story
    assert tries(airflow, dag_id, run_id, "T1")[1]["hostname"] == survivor, (t1_host, story)
    # The restart waited the strategy's delay (5 s) after the failure was decided.
    [failover] = [e for e in journal_events(store, dag_id, run_id) if e["kind"] == "failover"]
    # (U's region is rescheduled as a consumer; it had not started, so nothing of it is cleared.)
    assert "process was killed" in failover["cause"] and failover["regions"] == [["T1", "T2"], ["U"]], (
        failover
    )
    # T1's new try waited in the worker (under 5 s) or deferred until that time, or started after it.
    t1_log = airflow.task_log(dag_id, run_id, "T1", 2)
    waited_until = re.search(r"region failover: waiting [\d.]+ s, until (\S+)", t1_log)
    t1_restart = when(
        waited_until[1] if waited_until else tries(airflow, dag_id, run_id, "T1")[1]["start_date"]
    )
    # Without a wait, the try's start_date was set before its gate read the clock and found the restart
    # time passed (seen 42 ms before it on a loaded machine): that much earlier, still after the delay.
    slack = 0.01 if waited_until else 0.5
    assert failover["delay"] == 5 and t1_restart >= failover["restart_at"] - slack, (failover, t1_log[-2000:])
    assert failover["time"] > killed_at
    assert producer_try(store, dag_id, run_id, "s") == 1
    assert values(store, dag_id, run_id, "u") == expected(3)


def test_a_worker_lost_in_the_middle_of_a_connect_write_its_next_try_waits_for_it_and_commits_it(
    deployment, store, statsd_listener
):
    airflow = deployment.airflow
    dag_id, run_id = trigger(airflow, "ft_cluster_running_write")
    running = wait_until_running(airflow, dag_id, run_id, "W")
    deadline = time.monotonic() + 120
    while "writing ['w']" not in airflow.task_log(dag_id, run_id, "W", 1) and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(5)  # the application has sent its write to the Spark Connect server: 60 s of work
    lost = airflow.worker(running["hostname"])
    killed = airflow.kill_worker(lost)
    try:
        run, tis, story = finish(airflow, {"r": (dag_id, run_id)}, "r", timeout=300)
    finally:
        airflow.start_worker(lost, wait=False)  # up again while the next scenario starts
    computed = ledger_entries(deployment, run_id)
    assert len(killed) >= 3 and run["state"] == "success", story
    assert try_numbers(tis.values()) == {"W": 2}, story
    survivor = next(w for w in airflow.workers if w is not lost).address
    assert tries(airflow, dag_id, run_id, "W")[1]["hostname"] == survivor, story
    # One computation: the two Spark tasks of try 1's write, none of try 2's.
    assert [entry.split(":")[0] for entry in computed] == ["1", "1"], computed
    log = airflow.task_log(dag_id, run_id, "W", 2)
    assert "still runs in its Spark Connect session" in log, log[-3000:]
    assert "try 1's Spark work was still running when its worker died: waited" in log, log[-3000:]
    assert "no second computation started" in log and "writing ['w']" not in log, log[-3000:]
    assert producer_try(store, dag_id, run_id, "w") == 2
    assert values(store, dag_id, run_id, "w") == expected(0)
    [adopted] = [e for e in journal_events(store, dag_id, run_id) if e["kind"] == "adopted"]
    assert adopted["task"] == "W" and adopted["try_number"] == 2
    statsd_listener.wait_for(
        lambda metrics: any(
            m.name == "airflow.ft.partitions.adopted.running" and m.tags.get("dag_id") == dag_id
            for m in metrics
        )
    )


def test_a_spark_worker_lost_in_the_middle_of_a_write_costs_its_tasks_not_a_restart(deployment, store):
    #   V --v-->  (a 40 s write in two Spark tasks, one on each Spark worker's executor of the Connect
    #   server); one Spark worker SIGKILLed with its executor 10 s into it
    airflow, standalone = deployment.airflow, deployment.standalone
    dag_id, run_id = trigger(airflow, "ft_cluster_spark_worker_loss")
    wait_until_running(airflow, dag_id, run_id, "V")
    deadline = time.monotonic() + 120
    while "writing ['v']" not in airflow.task_log(dag_id, run_id, "V", 1) and time.monotonic() < deadline:
        time.sleep(1)
    started = time.monotonic()
    time.sleep(10)  # the write's two tasks run, 30 s of each left
    [lost, *_] = standalone.workers_with_executors()  # the Connect server's
    killed_at = time.time()
    killed = standalone.kill_worker(lost)
    try:
        run, tis, story = finish(airflow, {"r": (dag_id, run_id)}, "r", timeout=300)
        took = time.monotonic() - started
    finally:
        standalone.start_worker(lost)  # the machine is back for the scenarios after this one
    computed = ledger_entries(deployment, run_id)
    print(f"\n[a Spark worker lost] the 40 s write took {took:.0f} s from its start; no Airflow retry")
    assert len(killed) >= 2 and run["state"] == "success", story  # the worker and its executor
    assert try_numbers(tis.values()) == {"V": 1}, story  # Spark re-ran the lost task; Airflow nothing
    # every computation was try 1's; Spark ran what the lost worker was computing again (one task or
    # both, as its executors held them): a computation that ended 40 s after the kill began after it
    assert len(computed) >= 2 and {entry.split(":")[0] for entry in computed} == {"1"}, computed
    assert max(float(entry.split(":")[2]) for entry in computed) >= killed_at + 40 - 1, (killed_at, computed)
    manifest = store.manifest(RunRef(dag_id, run_id).parse("v"))
    partitions = [f.key.rsplit("/", 1)[1].split("-")[1] for f in manifest.files]
    assert sorted(partitions) == ["00000", "00001"], manifest.files  # the lost attempt's object: unlisted
    assert values(store, dag_id, run_id, "v") == expected(0)  # each row once


def recorded_batches(store, dag_id, run_id, task):
    """The micro-batches of a checkpointed stage on the executors' path whose output the store holds
    (a writing task's marker, spark/object_stream.py)."""
    prefix = StoreCheckpoints(store, RunRef(dag_id, run_id), task).prefix + "streams/"
    keys = [key.removeprefix(prefix).partition("/")[2] for key in store.list_objects(prefix)]
    return sorted({marker.batch_id for marker in task_markers(keys)})


def wait_for_batch(store, dag_id, run_id, task, batch, timeout=180):
    deadline = time.monotonic() + timeout
    while (
        max(recorded_batches(store, dag_id, run_id, task), default=-1) < batch and time.monotonic() < deadline
    ):
        time.sleep(0.5)
    assert max(recorded_batches(store, dag_id, run_id, task), default=-1) >= batch, f"no micro-batch {batch}"


def scaled_exactly_once(store, dag_id, run_id):
    rows = read_table(store, RunRef(dag_id, run_id).parse("scaled")).to_pylist()
    return sorted((r["sensor"], r["minute"], r["level"]) for r in rows) == [
        (i, i % 60, i % 13 * 10) for i in range(4800)
    ]  # every reading once: no micro-batch lost or written twice


def test_a_worker_lost_in_a_checkpointed_stage_its_retry_on_the_other_worker_resumes_on_the_spark_host(
    deployment, store
):
    airflow = deployment.airflow
    dag_id, run_id = trigger(airflow, "ft_cluster_checkpoint_worker_loss")
    running = wait_until_running(airflow, dag_id, run_id, "scale_slowly")
    wait_for_batch(store, dag_id, run_id, "scale_slowly", 3)
    lost = airflow.worker(running["hostname"])
    killed = airflow.kill_worker(lost)
    try:
        run, tis, story = finish(airflow, {"r": (dag_id, run_id)}, "r", timeout=300)
    finally:
        airflow.start_worker(lost, wait=False)
    assert len(killed) >= 3 and run["state"] == "success", story
    assert try_numbers(tis.values()) == {"make_samples": 1, "scale_slowly": 2}, story
    survivor = next(w for w in airflow.workers if w is not lost).address
    assert tries(airflow, dag_id, run_id, "scale_slowly")[1]["hostname"] == survivor, story
    events = journal_events(store, dag_id, run_id)
    [first, second] = [e for e in events if e["kind"] == "checkpoint" and e["task"] == "scale_slowly"]
    assert (first["try_number"], first["restored_from"]) == (1, None), first
    # The lost worker held nothing: the retry on the other one resumes from Spark's checkpoint, which
    # stayed on the Spark host with the Connect server
    assert second["try_number"] == 2 and second["restored_from"] >= 2, second  # 3 has markers: 2 committed
    assert second["restored_via"] == "spark", second
    assert second["reason"].startswith("scale_slowly try 2 resumed at checkpoint "), second
    assert scaled_exactly_once(store, dag_id, run_id)


def test_a_spark_worker_lost_in_a_checkpointed_stage_costs_its_tasks_and_each_row_is_written_once(
    deployment, store
):
    airflow, standalone = deployment.airflow, deployment.standalone
    dag_id, run_id = trigger(airflow, "ft_cluster_checkpoint_spark_worker_loss")
    wait_until_running(airflow, dag_id, run_id, "scale_slowly")
    wait_for_batch(store, dag_id, run_id, "scale_slowly", 2)
    [lost, *_] = standalone.workers_with_executors()  # one of the Connect server's
    killed = standalone.kill_worker(lost)
    assert max(recorded_batches(store, dag_id, run_id, "scale_slowly")) < 5  # in the middle of the stream
    try:
        run, tis, story = finish(airflow, {"r": (dag_id, run_id)}, "r", timeout=300)
    finally:
        standalone.start_worker(lost)
    assert len(killed) >= 2 and run["state"] == "success", story  # the worker and its executor
    assert try_numbers(tis.values()) == {"make_samples": 1, "scale_slowly": 1}, story  # Spark's, not a retry
    assert recorded_batches(store, dag_id, run_id, "scale_slowly") == []  # released by the commit
    assert scaled_exactly_once(store, dag_id, run_id)


def test_a_scheduler_restarted_during_a_restart_backoff_restarts_the_task_once_on_time(deployment, store):
    airflow = deployment.airflow
    dag_id, run_id = trigger(airflow, "ft_cluster_backoff", {"ft_faults": [{"task": "F", "times": 1}]})
    airflow.client.wait_for_task_instance(dag_id, run_id, "F", states=["up_for_retry"], timeout=300)
    failed_at = when(tries(airflow, dag_id, run_id, "F")[0]["end_date"])
    time.sleep(max(0.0, failed_at + 10 - time.time()))  # 10 s into the 45 s backoff
    airflow.restart_component("scheduler")  # SIGKILL (a crash), then a new scheduler
    restarted_at = time.time()
    run, tis, story = finish(airflow, {"r": (dag_id, run_id)}, "r", timeout=600)
    assert run["state"] == "success", story
    assert try_numbers(tis.values()) == {"F": 2, "G": 1}, story
    history = tries(airflow, dag_id, run_id, "F")
    queued = when(history[1]["queued_when"])
    assert restarted_at < queued, story  # the new scheduler queued it
    assert failed_at + 45 <= queued < failed_at + 45 + 30, (queued - failed_at, story)
    decisions = [e for e in journal_events(store, dag_id, run_id) if e["kind"] == "failover"]
    assert [(e["task"], e["try_number"], e["delay"]) for e in decisions] == [("F", 1, 45.0)], decisions
    assert values(store, dag_id, run_id, "g") == expected(1)


def test_with_two_schedulers_one_killed_during_a_backoff_the_restart_is_decided_and_queued_once(
    deployment, store
):
    """Airflow's HA mode: both schedulers run; one is SIGKILLed 10 s into a 45 s restart backoff and stays
    down. The failover decision (taken in the failing try's worker) exists once, and the other
    scheduler queues the restart once, on time."""
    airflow = deployment.airflow
    assert airflow.schedulers == ["scheduler", "scheduler-2"] and all(
        airflow.procs[name].poll() is None for name in airflow.schedulers
    )
    dag_id, run_id = trigger(airflow, "ft_cluster_backoff", {"ft_faults": [{"task": "F", "times": 1}]})
    airflow.client.wait_for_task_instance(dag_id, run_id, "F", states=["up_for_retry"], timeout=300)
    failed_at = when(tries(airflow, dag_id, run_id, "F")[0]["end_date"])
    time.sleep(max(0.0, failed_at + 10 - time.time()))
    airflow.kill_session("scheduler")  # a crash; scheduler-2 carries on alone
    killed_at = time.time()
    try:
        run, tis, story = finish(airflow, {"r": (dag_id, run_id)}, "r", timeout=600)
        assert run["state"] == "success", story
        assert try_numbers(tis.values()) == {"F": 2, "G": 1}, story
        queued = when(tries(airflow, dag_id, run_id, "F")[1]["queued_when"])
        assert killed_at < queued and failed_at + 45 <= queued < failed_at + 45 + 30, (
            queued - failed_at,
            story,
        )
        decisions = [e for e in journal_events(store, dag_id, run_id) if e["kind"] == "failover"]
        assert [(e["task"], e["try_number"], e["delay"]) for e in decisions] == [("F", 1, 45.0)], decisions
        assert values(store, dag_id, run_id, "g") == expected(1)
    finally:
        airflow.restart_component("scheduler")  # back to two for the scenarios after this one


def test_the_triggerer_down_through_a_deferred_restart_makes_it_late_not_lost_nor_twice(deployment, store):
    #   S --s--> [ T1 ~~t1 (pipelined)~~> T2 ] --t2--> U     T2 fails once: the region restarts in 30 s,
    #   T1's new try waiting deferred (a DateTimeTrigger); the triggerer is SIGKILLed 5 s into the
    #   backoff and started again 45 s later, 20 s after the restart was due
    airflow = deployment.airflow
    dag_id, run_id = trigger(
        airflow, "ft_cluster_triggerer_loss", {"ft_faults": [{"task": "T2", "times": 1}]}
    )
    airflow.client.wait_for_task_instance(dag_id, run_id, "T1", states=["deferred"], timeout=300, poll=0.2)
    [decision] = [e for e in journal_events(store, dag_id, run_id) if e["kind"] == "failover"]
    time.sleep(max(0.0, decision["time"] + 5 - time.time()))
    command = airflow.stop_component("triggerer")
    time.sleep(45)
    back = time.time()
    airflow.start_component("triggerer", command)
    run, tis, story = finish(airflow, {"r": (dag_id, run_id)}, "r", timeout=600)
    assert run["state"] == "success", story
    # T2 try 1 decided the restart and cleared T1 before it failed; try 2 waited for T1 (its upstream)
    assert try_numbers(tis.values()) == {"S": 1, "T1": 2, "T2": 2, "U": 1}, story
    decisions = [e for e in journal_events(store, dag_id, run_id) if e["kind"] == "failover"]
    assert [(e["task"], e["try_number"]) for e in decisions] == [("T2", 1)], decisions  # decided once
    # T1's restart waited for a triggerer: queued once one was back, not before the restart was due
    resumed = when(tries(airflow, dag_id, run_id, "T1")[1]["queued_when"])
    assert decision["restart_at"] <= back <= resumed < back + 30, (resumed - back, story)
    print(f"\n[the triggerer down 45 s] the restart came {resumed - decision['restart_at']:.0f} s late")
    assert values(store, dag_id, run_id, "u") == expected(3)


def test_a_restart_recorded_while_the_rest_api_is_unreachable_is_finished_once_it_is_back(deployment, store):
    airflow = deployment.airflow
    dag_id, run_id = trigger(airflow, "ft_cluster_api_outage", {"ft_faults": [{"task": "T2", "times": 1}]})
    airflow.client.wait_for_task_instance(dag_id, run_id, "T1", states=["success"], timeout=300, poll=0.2)
    # T2 starts next and fails at once; its failover decision is recorded while the workers cannot
    # reach the REST API (the airflow_api connection), for 60 s. Airflow's own components keep theirs.
    outage = threading.Thread(target=deployment.rest_api.outage, args=(60,))
    outage.start()
    began = time.time()
    try:
        run, tis, story = finish(airflow, {"r": (dag_id, run_id)}, "r", timeout=600)
    finally:
        outage.join()
    assert run["state"] == "success", story
    # T2 try 1 fails and decides the restart of its region (T1, T2) but cannot clear T1; try 2 finds the
    # decision unfinished, waits out the outage deferred, then clears T1 and lets itself go (T1 runs
    # first); try 3 does the work. Nothing ran twice: T1 once more, S and U once.
    assert try_numbers(tis.values()) == {"S": 1, "T1": 2, "T2": 3, "U": 1}, story
    events = journal_events(store, dag_id, run_id)
    kinds = [
        (e["kind"], e["task"], e.get("cleared")) for e in events if e["kind"] in ("failover", "reconciled")
    ]
    assert kinds == [("failover", "T2", []), ("reconciled", "T2", ["T1"])], events
    reconciled = next(e for e in events if e["kind"] == "reconciled")
    assert reconciled["time"] >= began + 60 - 1, reconciled["time"] - began
    assert "the Airflow REST API is unreachable" in airflow.task_log(dag_id, run_id, "T2", 2)
    assert values(store, dag_id, run_id, "u") == expected(3)
