"""Region failover in a real Airflow (scheduler, API server, triggerer, DAG processor), real local
Spark and the S3 test endpoint. Runs are triggered through the REST API; states and try numbers are
read back from it; data is read from the partition store.

All scenario runs (ft_harness/chaos/scenario_runs.py) are triggered at once so that the scheduler works
on them concurrently; each test then waits for its own run.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.stage_try.phases import parse_summary
from ft_harness.airflow.airflow_rest import try_numbers
from ft_harness.chaos.scenario_runs import SCENARIOS
from ft_harness.data.journal_records import stored_events

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

DAG_FILE = "ft_failover_scenarios.py"  # every scenario's DAG


@pytest.fixture(scope="module")
def runs(scenario_runs):
    return scenario_runs.start(SCENARIOS)


@pytest.fixture(scope="module")
def store(s3_endpoint, e2e_store_url):
    return S3PartitionStore(s3_endpoint.client(), e2e_store_url)


def finish(live_airflow, runs, name, timeout=1100):
    dag_id, run_id = runs[name]
    run = live_airflow.client.wait_for_dag_run(dag_id, run_id, timeout=timeout)
    tis = {(ti["task_id"], ti["map_index"]): ti for ti in live_airflow.client.task_instances(dag_id, run_id)}
    return run, tis, live_airflow.describe_run(dag_id, run_id)


def values(store, dag_id, run_id, partition_id):
    table = read_table(store, RunRef(dag_id, run_id).parse(partition_id)).to_pylist()
    return sorted((row["key"], row["value"]) for row in table)


def expected(depth, keys=range(40)):
    """What a failure-free run outputs at ``depth`` stages below the source (see apps/stage.py)."""
    return [(key, key * 10 + depth) for key in keys]


def producer_try(store, dag_id, run_id, partition_id):
    return store.manifest(RunRef(dag_id, run_id).parse(partition_id)).producer.try_number


def gaps(live_airflow, dag_id, run_id, task_id):
    """Seconds between the end of each try and the moment the scheduler queued the next.

    The restart strategy decides when the next try may run; Airflow queues it then. How long the
    queued try then waits for a free worker slot is the executor's capacity, not the strategy: with
    every scenario in flight on a 2-core machine that wait reached 90 s. The start also follows the
    queueing, so ``start - end`` is never below what is measured here."""
    history = live_airflow.client.task_instance_tries(dag_id, run_id, task_id)
    ends = [datetime.fromisoformat(t["end_date"]) for t in history]
    queued = [datetime.fromisoformat(t["queued_when"]) for t in history]
    starts = [datetime.fromisoformat(t["start_date"]) for t in history]
    assert all(q <= s for q, s in zip(queued, starts, strict=True)), history
    return [(queued[i + 1] - ends[i]).total_seconds() for i in range(len(history) - 1)]


def seconds_waited(log: str) -> float | None:
    """From a try's log: how long it had to wait for its restart time when it started."""
    match = re.search(r"region failover: waiting ([\d.]+) s, until", log)
    return None if match is None else float(match.group(1))


def restart_time(failed_log: str, failed_at: datetime) -> datetime:
    """The restart time a failed try's decision logged ("next try not before 15:13:08 UTC", truncated
    to the second), on the day of ``failed_at`` (the failed try's end)."""
    clock = re.search(r"next try not before (\d\d:\d\d:\d\d) UTC", failed_log).group(1)
    moment = datetime.fromisoformat(f"{failed_at.date().isoformat()}T{clock}+00:00")
    return moment if moment >= failed_at - timedelta(hours=12) else moment + timedelta(days=1)


def log_of(live_airflow, dag_id, run_id, task_id, try_number, map_index=-1):
    return live_airflow.task_log(dag_id, run_id, task_id, try_number, map_index=map_index)


def scratch_directory(log):
    """The scratch directory a try logged (stage_try/attempt.py, execution/workdir.py), if any: a
    try that deferred shows, without remote logging, only the part of its log of one worker."""
    found = re.search(r"scratch directory of this try: ([^\s\"',}]+)", log)
    return Path(found.group(1)) if found else None


def test_seed002_failed_consumer_restarts_alone(live_airflow, runs, store):
    #   A --> B --> C (fails once)
    #          \\-> D
    run, tis, story = finish(live_airflow, runs, "seed002_c_fails")
    dag_id, run_id = runs["seed002_c_fails"]
    assert run["state"] == "success", story
    assert try_numbers(tis.values()) == {"A": 1, "B": 1, "C": 2, "D": 1}, story
    assert producer_try(store, dag_id, run_id, "b") == 1  # B's partition was re-read, not rebuilt
    assert values(store, dag_id, run_id, "c") == expected(2)
    assert values(store, dag_id, run_id, "d") == expected(2)
    first_try = log_of(live_airflow, dag_id, run_id, "C", 1)
    assert "restarting 1 region(s) [C]" in first_try
    # With Airflow's defaults ([core] lazy_load_plugins = True), the scheduler preloaded the Spark
    # Connect client before its executor's workers forked: no stage try imports it.
    d_log = log_of(live_airflow, dag_id, run_id, "D", 1)
    assert "Spark Connect client: preloaded in the worker" in d_log
    phases = parse_summary(d_log)  # where D's try spent its time, said once at its end
    assert phases is not None and {"gate", "reuse", "inputs", "session", "spark", "commit"} <= set(phases)
    assert 0 < phases["spark"] < phases["total"], phases


def test_seed002_retry_reads_its_input_from_the_task_local_cache(live_airflow, runs):
    # Task-local recovery (this live Airflow has a bounded cache; the Celery deployment has none): the
    # retry on this worker reads its input from the cache, with no GET of the partition's objects.
    run, _, story = finish(live_airflow, runs, "seed002_c_fails")
    dag_id, run_id = runs["seed002_c_fails"]
    assert run["state"] == "success", story
    read = re.search(r"input b: (\d+) files from the task-local cache, (\d+) downloaded", log_of(
        live_airflow, dag_id, run_id, "C", 2
    ))  # fmt: skip
    assert read and int(read.group(1)) >= 1 and read.group(2) == "0", story


def test_seed002_lost_partition_backtracks_to_its_producer(live_airflow, runs, store):
    #   A --> B --(b lost)--> C
    #          \\-----------> D      B, C and D run again; A's partition is re-used
    run, tis, story = finish(live_airflow, runs, "seed002_b_lost")
    dag_id, run_id = runs["seed002_b_lost"]
    assert run["state"] == "success", story
    # C deletes b and fails on it; D reads b too and may fail on it first: at its check
    # (PartitionNotFound) or, when b goes between its check and its read, at the read (the executors'
    # PartitionDataCorrupt). Whichever decides first records the backtracking decision, labelled lost
    # data (the other's try is then stopped by it, not counted). Read from the run's journal: a try's
    # log is served by the worker that ran it, and a Celery worker may not serve it any more.
    events = stored_events(RecoveryJournal(store, RunRef(dag_id, run_id)))
    lost = [e for e in events if e["kind"] == "failover" and "b" in e["unavailable"]]
    assert lost and lost[0]["restart"] and lost[0]["labels"]["kind"] == "lost data", (story, events)
    decided_by = [lost[0]["task"]]
    assert decided_by[0] in ("C", "D"), events
    counts = try_numbers(tis.values())
    # The decider runs again once (try 2). The other one's try 1, stopped by that decision, may already
    # be up for retry when the decision's clear reaches it: the clear then ends its idle try 2 too, and
    # its work runs in try 3. Either way each runs its work once after b is rebuilt.
    [decider] = decided_by
    other = "D" if decider == "C" else "C"
    assert counts["A"] == 1 and counts["B"] == 2 and counts[decider] == 2 and counts[other] in (2, 3), story
    assert producer_try(store, dag_id, run_id, "c") == counts["C"]
    assert producer_try(store, dag_id, run_id, "d") == counts["D"]
    assert producer_try(store, dag_id, run_id, "a") == 1
    assert producer_try(store, dag_id, run_id, "b") == 2
    rebuilt_b = store.manifest(RunRef(dag_id, run_id).parse("b")).created_at
    assert store.manifest(RunRef(dag_id, run_id).parse("d")).created_at > rebuilt_b  # D read the new b
    assert store.manifest(RunRef(dag_id, run_id).parse("c")).created_at > rebuilt_b  # and C
    assert values(store, dag_id, run_id, "c") == expected(2)
    assert values(store, dag_id, run_id, "d") == expected(2)


def test_pipelined_region_restarts_as_a_unit(live_airflow, runs, store):
    #   S --> [ T1 ~~> T2 (fails once) ] --> U
    run, tis, story = finish(live_airflow, runs, "pipelined_t2_fails")
    dag_id, run_id = runs["pipelined_t2_fails"]
    assert run["state"] == "success", story
    assert try_numbers(tis.values()) == {"S": 1, "T1": 2, "T2": 2, "U": 1}, story
    assert producer_try(store, dag_id, run_id, "s") == 1
    assert values(store, dag_id, run_id, "u") == expected(3)
    # The run's end (a DAG callback in the DAG processor) frees the S3 scratch of both executions of
    # t1 and starts the retention clock; the handle stays (it fences zombie tries).
    run_ref = RunRef(dag_id, run_id)
    scratch = store.layout.scratch_run_prefix(run_ref)
    ended = store.layout.marker_key(run_ref, "ended")
    eventually(
        lambda: (
            not store.modified_times(scratch)
            and ended in store.modified_times(store.layout.run_prefix(run_ref))
        ),
        what=f"release of s3://{store.bucket}/{scratch}",
        live_airflow=live_airflow,
    )
    assert b'"succeeded": true' in store.json_objects.get_bytes(ended).value
    assert store.json_objects.get_bytes(store.layout.pipelined_handle_key(run_ref.parse("t1"))) is not None


def test_the_end_of_a_failed_run_drops_the_views_nobody_consumed(live_airflow, runs, store, spark_connect):
    #   T1 ~~t1 (a view in the Connect server)~~> T2 (fails, strategy none): the run fails
    from pyspark.sql.connect.session import SparkSession

    from airflow_ft_provider.partitions.pipelined import PipelinedPartitions

    run, tis, story = finish(live_airflow, runs, "connect_run_fails")
    dag_id, run_id = runs["connect_run_fails"]
    assert run["state"] == "failed", story
    assert try_numbers(tis.values()) == {"T1": 1, "T2": 1}, story
    handle = PipelinedPartitions(store).current(RunRef(dag_id, run_id).parse("t1"))
    assert handle is not None and handle.engine is not None and handle.consumed_by == (), story
    assert handle.engine.server == spark_connect.url
    session = SparkSession.builder.remote(spark_connect.url).create()
    try:
        eventually(
            lambda: not session.catalog.tableExists(f"global_temp.{handle.engine.view}"),
            what=f"drop of view {handle.engine.view}",
            live_airflow=live_airflow,
        )
    finally:
        session.stop()
    # and starts the failed run's retention clock too
    ended = store.layout.marker_key(RunRef(dag_id, run_id), "ended")
    eventually(
        lambda: store.json_objects.get_bytes(ended) is not None,
        what=f"s3://{store.bucket}/{ended}",
        live_airflow=live_airflow,
    )
    assert b'"succeeded": false' in store.json_objects.get_bytes(ended).value


def eventually(condition, *, what, live_airflow, timeout=120):
    """DAG callbacks run in the DAG processor a little after the run ends. These DAGs share one file, and
    runs of several end together: Airflow may hold a callback that arrives while the file is being
    parsed for another until the file is next queued (``LiveAirflow.requeue_dag_file``), which happens
    here after 30 s."""
    start = time.monotonic()
    requeued = False
    while not condition():
        if not requeued and time.monotonic() - start > 30:
            live_airflow.requeue_dag_file(DAG_FILE)
            requeued = True
        assert time.monotonic() - start < timeout, f"no {what} within {timeout} s of the run's end"
        time.sleep(1)


def test_a_try_killed_after_its_spark_work_is_committed_by_the_next_without_spark(
    live_airflow, runs, store, statsd_listener
):
    #   A --> B --> C
    #            \-> D (SIGKILL after its Spark work, before committing d)
    run, tis, story = finish(live_airflow, runs, "seed002_d_killed")
    dag_id, run_id = runs["seed002_d_killed"]
    assert run["state"] == "success", story
    assert try_numbers(tis.values()) == {"A": 1, "B": 1, "C": 1, "D": 2}, story
    d = store.manifest(RunRef(dag_id, run_id).parse("d"))
    assert d.producer.try_number == 2 and d.provenance.content is not None, story
    assert values(store, dag_id, run_id, "d") == expected(2)
    retry = log_of(live_airflow, dag_id, run_id, "D", 2)
    said = (
        "try 1 finished its Spark work and was killed before its commit: output committed, Spark not started"
    )
    assert said in retry and "stage D (spark-connect" not in retry, retry[-3000:]
    history = stored_events(RecoveryJournal(store, RunRef(dag_id, run_id)))
    assert [(e["task"], e["try_number"]) for e in history if e["kind"] == "adopted"] == [("D", 2)], story
    statsd_listener.wait_for(  # counted, by kind (the metric's tags do not tell runs apart)
        lambda metrics: any(
            m.name == "airflow.ft.partitions.adopted.finished" and m.tags.get("dag_id") == dag_id
            for m in metrics
        )
    )
    if all(f.key.startswith(f"attempts/{d.attempt_id}/") and d.attempt_id.startswith("t1-") for f in d.files):
        # the executors' data path (tests/cluster: Spark on a host of its own): try 1's executors wrote
        # d into S3 and try 2 committed that attempt, on whichever worker it ran
        return
    # staged: the killed try's scratch directory (its staged output) went with the adoption
    killed = scratch_directory(log_of(live_airflow, dag_id, run_id, "D", 1))
    assert killed is not None and not killed.exists(), story


def test_killed_task_process_still_restarts_its_region(live_airflow, runs, store):
    #   S --> [ T1 ~~> T2 (SIGKILL after its Spark job, before committing) ] --> U
    run, tis, story = finish(live_airflow, runs, "pipelined_t2_killed")
    dag_id, run_id = runs["pipelined_t2_killed"]
    assert run["state"] == "success", story
    counts = try_numbers(tis.values())
    assert counts["S"] == 1 and counts["T1"] == 2 and counts["T2"] >= 2, story
    assert producer_try(store, dag_id, run_id, "s") == 1
    assert values(store, dag_id, run_id, "u") == expected(3)
    history = [
        e for e in stored_events(RecoveryJournal(store, RunRef(dag_id, run_id))) if e["kind"] == "failover"
    ]
    assert history and "process was killed" in history[0]["cause"]
    # The killed try's Connect session outlived it: the next try that opened one joined it first (its
    # work had finished, so there was nothing to interrupt) - task_state_store carried its session id.
    retries = [log_of(live_airflow, dag_id, run_id, "T2", n) for n in range(2, counts["T2"] + 1)]
    assert any(
        "try 1's Spark Connect session" in log or "that try 1 left running" in log for log in retries
    ), story
    # The killed try could not remove its scratch directory (its staged output); every later try on
    # the same worker removes it first. With one worker (LocalExecutor) the region's next tries are on
    # it; with several (tests/cluster, a TMPDIR each) it is checked when one of them was.
    killed_try = log_of(live_airflow, dag_id, run_id, "T2", 1)
    killed = scratch_directory(killed_try)
    assert killed is not None, killed_try[-3000:]
    later = [scratch_directory(log_of(live_airflow, dag_id, run_id, "T1", 2))]
    later += [
        scratch_directory(log_of(live_airflow, dag_id, run_id, "T2", n)) for n in range(2, counts["T2"] + 1)
    ]
    one_worker = not hasattr(live_airflow, "workers")  # CeleryAirflow has several
    if one_worker or any(d is not None and d.parent == killed.parent for d in later):
        assert not killed.exists(), story


def test_mapped_stage_restarts_only_the_failed_index_chain(live_airflow, runs, store):
    #   read[0] --> sink[0]
    #   read[1] --(raw[1] lost)--> sink[1]     only index 1 runs again
    run, tis, story = finish(live_airflow, runs, "mapped_index_1")
    dag_id, run_id = runs["mapped_index_1"]
    assert run["state"] == "success", story
    assert try_numbers(tis.values()) == {"read[0]": 1, "read[1]": 2, "sink[0]": 1, "sink[1]": 2}, story
    # read[1], cleared at once, waits out what is left of the 40 s backoff when its try starts: deferred
    # (no worker slot) if 5 s or more (MIN_DEFERRAL_SECONDS), else in the worker. A try that Celery
    # starts after the restart time (every slot busy for 40 s: seen in CI) has nothing left to wait.
    [failed_try, *_] = live_airflow.client.task_instance_tries(dag_id, run_id, "sink", map_index=1)
    failed = log_of(live_airflow, dag_id, run_id, "sink", 1, map_index=1)
    not_before = restart_time(failed, datetime.fromisoformat(failed_try["end_date"]))
    restarted = log_of(live_airflow, dag_id, run_id, "read", 2, map_index=1)
    wait = seconds_waited(restarted)
    if wait is None:  # it started after its restart time
        started = datetime.fromisoformat(tis[("read", 1)]["start_date"])
        assert started >= not_before, (started, not_before, restarted[-3000:])
    else:
        assert wait > 0, restarted[-3000:]
        assert ("Pausing task as DEFERRED" in restarted) == (wait >= 5), (wait, restarted[-3000:])
    assert values(store, dag_id, run_id, "sunk[0]") == expected(1, range(0, 40, 2))
    assert values(store, dag_id, run_id, "sunk[1]") == expected(1, range(1, 40, 2))


def test_fixed_delay_tries_attempts_plus_one_times_then_fails(live_airflow, runs):
    run, tis, story = finish(live_airflow, runs, "fixed_delay")
    dag_id, run_id = runs["fixed_delay"]
    assert run["state"] == "failed", story
    assert tis[("F", -1)]["try_number"] == 3 and tis[("F", -1)]["state"] == "failed", story
    assert tis[("G", -1)]["state"] == "upstream_failed", story
    for gap in gaps(live_airflow, dag_id, run_id, "F"):
        assert 6 <= gap < 6 + 20, story  # the configured delay, within scheduler tolerance
    assert "Recovery is suppressed by FixedDelay(attempts=2, delay=6 s)" in log_of(
        live_airflow, dag_id, run_id, "F", 3
    )


def test_exponential_delay_grows_and_respects_the_maximum(live_airflow, runs, store):
    run, tis, story = finish(live_airflow, runs, "exponential")
    dag_id, run_id = runs["exponential"]
    assert run["state"] == "failed", story
    assert tis[("F", -1)]["try_number"] == 4, story  # attempts-before-reset-backoff 3: the 4th failure stops
    events = stored_events(RecoveryJournal(store, RunRef(dag_id, run_id)))
    restarts = [e for e in events if e["kind"] == "failover" and e["restart"]]
    # The backoffs the strategy drew: 3 s, x2 = 6 s, x2 = 12 s capped at 8 s (exact, in its state)
    assert [e["strategy_state"]["backoff"] for e in restarts] == [3.0, 6.0, 8.0], story
    # The delay is what is left of the backoff when the decision is taken (Flink's getBackoffTime:
    # nextRestartTimestamp - now): the backoff, less the decision's own time (64 ms seen under load)
    decided = [e["delay"] for e in restarts]
    for delay, backoff in zip(decided, [3.0, 6.0, 8.0], strict=True):
        assert backoff - 1.0 < delay <= backoff, (decided, story)
    # Each restart waited at least its delay. The gaps themselves need not grow: a try can also queue
    # for a free worker slot on the loaded test machine (seen: 9.6 s, then 8.0 s).
    measured = gaps(live_airflow, dag_id, run_id, "F")
    for gap, delay in zip(measured, decided, strict=True):
        assert delay <= gap < delay + 20, (measured, story)
    assert "Recovery is suppressed by ExponentialDelay(" in log_of(live_airflow, dag_id, run_id, "F", 4)


def test_failure_rate_fails_on_the_failure_above_the_maximum(live_airflow, runs):
    run, tis, story = finish(live_airflow, runs, "failure_rate")
    dag_id, run_id = runs["failure_rate"]
    assert run["state"] == "failed", story
    assert tis[("F", -1)]["try_number"] == 3, story  # max 2 per interval: the 3rd failure is refused
    assert "Recovery is suppressed by FailureRate(max-failures-per-interval=2" in log_of(
        live_airflow, dag_id, run_id, "F", 3
    )


def test_manual_region_restart_reruns_region_and_consumers_only(live_airflow, runs, store, s3_endpoint):
    #   S --> [ T1 ~~> T2 ] --> U       restart T1's region by hand after the run finished (the run on
    #   the Spark Connect server: what is restarted does not depend on the backend, and the region
    #   test above keeps spark-submit live)
    run, before, story = finish(live_airflow, runs, "pipelined_t2_killed")
    dag_id, run_id = runs["pipelined_t2_killed"]
    assert run["state"] == "success", story
    result = live_airflow.provider_cli(
        "restart-region", "--dag-id", dag_id, "--run-id", run_id, "--task", "T1"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == {
        "task": "T1",
        "restarted": ["T1", "T2", "U"],
    }  # stdout: the result only
    live_airflow.client.wait_for_task_instance(
        dag_id,
        run_id,
        "U",
        predicate=lambda ti: ti["try_number"] > 1 and ti["state"] == "success",
        timeout=600,
    )
    run, after, story = finish(live_airflow, runs, "pipelined_t2_killed")
    assert run["state"] == "success", story
    reruns = {
        task: count - try_numbers(before.values())[task]
        for task, count in try_numbers(after.values()).items()
    }
    assert reruns == {"S": 0, "T1": 1, "T2": 1, "U": 1}, story
    assert producer_try(store, dag_id, run_id, "s") == 1  # the upstream partition was read, not recomputed
    assert values(store, dag_id, run_id, "u") == expected(3)
    # T2 wrote the same rows again, so U's new try reused its output: no Spark, the same files
    u_try = after[("U", -1)]["try_number"]
    u = store.manifest(RunRef(dag_id, run_id).parse("u"))
    assert u.producer.try_number == u_try and u.attempt_id.startswith(f"t{u_try - 1}-"), story
    assert u.provenance.lineage is not None and u.provenance.content is not None
    u_log = log_of(live_airflow, dag_id, run_id, "U", u_try)
    said = f"inputs identical to try {u_try - 1}'s: output of try {u_try - 1} reused, Spark not started"
    assert said in u_log and "stage U (spark-connect" not in u_log, u_log[-3000:]
    history = stored_events(RecoveryJournal(store, RunRef(dag_id, run_id)))
    assert [(e["task"], e["try_number"]) for e in history if e["kind"] == "reused"] == [("U", u_try)]
