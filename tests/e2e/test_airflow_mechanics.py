"""Experiments against a real running Airflow 3.3 that pin down the mechanics the design relies on.

All DAG runs are triggered up front (module fixture ``runs``) so they progress in parallel; a background
``TaskStateRecorder`` keeps the state history of every task instance, so short-lived states (DEFERRED,
UP_FOR_RETRY, RESTARTING) are seen even if a test looks late. The DAGs are in ``tests/e2e/dags/``; they
record what they observe in the fixture's scratch directory (``ft_e2e_common``).

Facts verified here (numbers from a run are printed with ``-s``):

1. ``airflow.sdk.RetryPolicy.evaluate(exception, try_number, max_tries, context)`` runs in the task
   runner; ``RetryDecision.retry(delay=...)`` replaces ``retry_delay`` for that retry;
   ``RetryDecision.fail(reason)`` ends the task FAILED at once (reason in the log); a policy cannot
   exceed ``retries``. Attach with ``retry_policy=`` on any operator / ``@task``.
2. A task can clear other task instances of its run via ``POST /api/v2/dags/{id}/clearTaskInstances``
   (``dry_run=false, only_failed=false``, ``[task_id, map_index]`` items); ``include_downstream``
   decides whether downstream tasks re-run. A RUNNING instance becomes RESTARTING, is killed on its
   next heartbeat (``on_kill`` runs), re-runs with the next try number *without* a reset retry
   budget, and its ``on_retry_callback`` runs in the DAG processor.
3. ``DateTimeTrigger`` deferral: DEFERRED, resumed by the triggerer, same try, XCom kept.
4. ``context["task_state_store"]`` survives a retry and a clear; XCom is wiped at every new try.
5. SIGKILL: the retry policy never runs; ``on_retry_callback`` *does* run, in the DAG processor
   (twice after a lost worker). Task process killed: UP_FOR_RETRY within seconds (executor event);
   whole worker killed: after ``[scheduler] task_instance_heartbeat_timeout``.
6. ``on_retry_callback`` sees UP_FOR_RETRY; ``on_failure_callback`` sees RUNNING.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from datetime import timedelta

import pytest

from ft_harness.airflow.airflow_rest import format_task_instances, parse_ts
from ft_harness.airflow.live_environment import HEARTBEAT_TIMEOUT_S
from ft_harness.airflow.task_states import TaskStateRecorder
from tests.e2e.dags.ft_e2e_common import read_records, wait_for_records

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(480)]

POLICY_DELAY = timedelta(seconds=8)  # keep in step with dags/ft_e2e_retry_policy.py
FAIL_REASON = "ft-e2e: fatal error, the policy refuses to retry"
DEFER_SECONDS = 10
HEARTBEAT_TIMEOUT = HEARTBEAT_TIMEOUT_S  # the fixture's [scheduler] task_instance_heartbeat_timeout


@pytest.fixture(scope="module")
def af(live_airflow):
    return live_airflow


@pytest.fixture(scope="module")
def recorder(af):
    rec = TaskStateRecorder(af.new_client, interval=1.0)
    yield rec
    rec.stop()


@pytest.fixture(scope="module")
def runs(af, recorder):
    """Trigger every experiment's DAG run at once; ``{name: (dag_id, run_id)}``."""
    tag = uuid.uuid4().hex[:6]
    wanted = {
        "sigkill": ("ft_e2e_sigkill", {}),
        "retry": ("ft_e2e_retry_policy", {}),
        "clear_nodown": ("ft_e2e_clear_other", {"include_downstream": False}),
        "clear_down": ("ft_e2e_clear_other", {"include_downstream": True}),
        "defer": ("ft_e2e_defer", {"defer_seconds": DEFER_SECONDS}),
        "state": ("ft_e2e_state_store", {}),
        "callbacks": ("ft_e2e_callbacks", {}),
    }
    out = {}
    for name, (dag_id, conf) in wanted.items():
        run = af.client.trigger_dag_run(dag_id, conf=conf, run_id=f"{name}_{tag}")
        out[name] = (dag_id, run["dag_run_id"])
        recorder.watch(dag_id, run["dag_run_id"])
    return out


def _records(af, dag_id, run_id, name):
    return read_records(dag_id, run_id, name, root=af.scratch)


def _wait_records(af, dag_id, run_id, name, count=1, timeout=120):
    return wait_for_records(dag_id, run_id, name, count=count, timeout=timeout, root=af.scratch)


def _wait_callback_records(af, dag_file, dag_id, run_id, name, count=1, timeout=60):
    """Records of a task callback, which runs in the DAG processor. Airflow 3.3 holds a callback that
    arrives while its DAG file is being parsed (for another run's callback, say) until the file is next
    queued, 10 min later here: after 30 s, the file is queued again (``LiveAirflow.requeue_dag_file``)."""
    try:
        return _wait_records(af, dag_id, run_id, name, count=count, timeout=30)
    except TimeoutError:
        af.requeue_dag_file(dag_file)
        return _wait_records(af, dag_id, run_id, name, count=count, timeout=timeout)


def _tries(af, dag_id, run_id, task_id, map_index=-1):
    return af.client.task_instance_tries(dag_id, run_id, task_id, map_index)


# -- 5. SIGKILL (first: these chains take longest) -------------------------------------------------


def _kill_and_observe(af, recorder, dag_id, run_id, task_id, *, kill_supervisor: bool, timeout: float):
    api = af.client
    rec = _wait_records(af, dag_id, run_id, f"{task_id}_try", timeout=180)[0]
    assert rec["try_number"] == 1 and rec["where"] == "task_runner", rec
    # Make sure we are about to kill processes of *this* Airflow: the task runner and its supervisor
    # (the LocalExecutor worker process).
    targets = [rec["pid"]] + ([rec["ppid"]] if kill_supervisor else [])
    for pid in targets:
        assert af.owns_pid(pid), f"pid {pid} is not part of this Airflow"
    if kill_supervisor:
        assert "LocalExecutor" in rec["parent_proc"], rec
    api.wait_for_task_instance(dag_id, run_id, task_id, states=["running"], timeout=60)
    t_kill = time.time()
    for pid in reversed(targets):  # supervisor first, so it cannot react to the child's death
        os.kill(pid, signal.SIGKILL)
    left = api.wait_for_task_instance(
        dag_id,
        run_id,
        task_id,
        predicate=lambda ti: ti["state"] != "running" or ti["try_number"] > 1,
        timeout=timeout,
        poll=0.25,
    )
    t_detect = time.time()
    final = api.wait_for_task_instance(dag_id, run_id, task_id, states=["success", "failed"], timeout=120)
    history = recorder.history(dag_id, run_id, task_id)
    return {
        "record": rec,
        "detected_after_s": t_detect - t_kill,
        "first_state_after_kill": left["state"],
        "final": final,
        "history": [(round(t - t_kill, 1), s, n) for t, s, n in history if t >= t_kill - 1],
        "t_kill": t_kill,
    }


def test_sigkill_task_process(af, runs, recorder):
    """Kill only the task-runner process; its supervisor survives and reports the exit."""
    dag_id, run_id = runs["sigkill"]
    obs = _kill_and_observe(af, recorder, dag_id, run_id, "killed_task", kill_supervisor=False, timeout=90)
    print(f"\n[5a] task process SIGKILL: {obs['history']}, detected after {obs['detected_after_s']:.1f}s")

    tries = _tries(af, dag_id, run_id, "killed_task")
    assert obs["final"]["state"] == "success" and obs["final"]["try_number"] == 2, tries
    # The killed try went UP_FOR_RETRY (history rows of retried tries are archived as "failed").
    assert obs["first_state_after_kill"] == "up_for_retry", obs
    assert [t["state"] for t in tries] == ["failed", "success"], tries
    # The retry policy never ran: it runs in the task process, which was dead.
    time.sleep(3)
    assert [r for r in _records(af, dag_id, run_id, "policy_evaluate") if r["task_id"] == "killed_task"] == []
    # Callbacks: on_retry_callback *does* run -- not in the task process but in the DAG processor,
    # requested by the scheduler when it finds the TI still RUNNING although the executor is done.
    retry_cb = _wait_callback_records(af, "ft_e2e_sigkill.py", dag_id, run_id, "killed_task_on_retry")
    assert len(retry_cb) == 1, retry_cb
    assert retry_cb[0]["where"] == "dag_processor", retry_cb
    assert _records(af, dag_id, run_id, "killed_task_on_failure") == []
    # Detected on the executor event, long before the heartbeat timeout: the supervisor survives, does
    # NOT report the state (UP_FOR_RETRY counts as "sent directly"), the LocalExecutor reports the
    # workload as done, and the scheduler finds the TI still RUNNING ("state mismatch") and fails it
    # -> UP_FOR_RETRY + callback request.
    assert obs["detected_after_s"] < HEARTBEAT_TIMEOUT, obs
    events = {e["event"] for e in af.client.event_logs(dag_id, run_id=run_id, task_id="killed_task")}
    assert "state mismatch" in events and "heartbeat timeout" not in events, events


def test_sigkill_whole_worker(af, runs, recorder):
    """Kill supervisor + task runner: only the scheduler's heartbeat-timeout check notices."""
    dag_id, run_id = runs["sigkill"]
    obs = _kill_and_observe(
        af, recorder, dag_id, run_id, "killed_worker", kill_supervisor=True, timeout=HEARTBEAT_TIMEOUT + 60
    )
    print(f"\n[5b] worker SIGKILL: {obs['history']}, detected after {obs['detected_after_s']:.1f}s")

    tries = _tries(af, dag_id, run_id, "killed_worker")
    assert obs["final"]["state"] == "success" and obs["final"]["try_number"] == 2, tries
    assert obs["first_state_after_kill"] == "up_for_retry", obs
    assert [t["state"] for t in tries] == ["failed", "success"], tries
    # Heartbeat timeout (HEARTBEAT_TIMEOUT here, counted from the last heartbeat: the supervisor sends
    # one every [workers] min_heartbeat_interval = 5 s, later when the machine is busy) + detection
    # interval (2 s) + scheduler loop. A killed task process alone is noticed in seconds (test above).
    assert HEARTBEAT_TIMEOUT - 5 - 3 <= obs["detected_after_s"] <= HEARTBEAT_TIMEOUT + 30, obs
    events = {e["event"] for e in af.client.event_logs(dag_id, run_id=run_id, task_id="killed_worker")}
    assert "heartbeat timeout" in events, events
    time.sleep(3)
    evals = _records(af, dag_id, run_id, "policy_evaluate")
    assert [r for r in evals if r["task_id"] == "killed_worker"] == []
    # on_retry_callback runs in the DAG processor, for try 1, once or twice: the scheduler's
    # heartbeat-timeout purge (TI still RUNNING) sends one, and the executor's FAILED event for the
    # same try sends another only if it is processed before the purge has moved the TI on. Which of
    # the two comes first is up to the scheduler loop, so the count is 1 or 2 -- callbacks must be
    # idempotent either way.
    _wait_callback_records(af, "ft_e2e_sigkill.py", dag_id, run_id, "killed_worker_on_retry")
    time.sleep(5)
    retry_cb = _records(af, dag_id, run_id, "killed_worker_on_retry")
    seen = [r.get("rest_state") for r in retry_cb]
    print(f"[5b] on_retry_callback ran {len(retry_cb)}x, seen states: {seen}")
    assert len(retry_cb) in (1, 2), retry_cb
    assert {(r["where"], r["try_number"]) for r in retry_cb} == {("dag_processor", 1)}, retry_cb
    assert _records(af, dag_id, run_id, "killed_worker_on_failure") == []


# -- 1. RetryPolicy --------------------------------------------------------------------------------


def test_retry_policy_delay_and_fail(af, runs, recorder):
    dag_id, run_id = runs["retry"]
    api = af.client
    final = api.wait_for_dag_run(dag_id, run_id, timeout=180)
    tis = {t["task_id"]: t for t in api.task_instances(dag_id, run_id)}
    table = format_task_instances(tis.values())
    assert final["state"] == "failed", table  # policy_fail and policy_capped fail the run

    # retry(delay=8s) overrides retry_delay=10min for that retry.
    assert tis["policy_delay"]["state"] == "success" and tis["policy_delay"]["try_number"] == 2, table
    tries = _tries(af, dag_id, run_id, "policy_delay")
    # The live TI went UP_FOR_RETRY; the history row of a retried try is archived as "failed".
    assert "up_for_retry" in recorder.states(dag_id, run_id, "policy_delay")
    assert [t["state"] for t in tries] == ["failed", "success"], tries
    gap = (parse_ts(tries[1]["start_date"]) - parse_ts(tries[0]["end_date"])).total_seconds()
    print(f"\n[1] policy delay {POLICY_DELAY.total_seconds():.0f}s -> observed retry gap {gap:.2f}s")
    assert POLICY_DELAY.total_seconds() <= gap <= POLICY_DELAY.total_seconds() + 20, gap

    evals = {r["task_id"]: [] for r in _records(af, dag_id, run_id, "policy_evaluate")}
    for r in _records(af, dag_id, run_id, "policy_evaluate"):
        evals[r["task_id"]].append(r)
    (ev,) = evals["policy_delay"]
    assert ev["try_number"] == 1 and ev["max_tries"] == 2 and ev["exception_type"] == "RuntimeError", ev
    assert ev["where"] == "task_runner" and ev["context_is_none"] is False, ev

    # fail(reason) -> FAILED at once although 3 retries were left; the reason is in the task log.
    assert tis["policy_fail"]["state"] == "failed" and tis["policy_fail"]["try_number"] == 1, table
    assert tis["policy_fail"]["max_tries"] == 3
    assert [t["state"] for t in _tries(af, dag_id, run_id, "policy_fail")] == ["failed"]
    log = api.task_log(dag_id, run_id, "policy_fail", 1)
    assert FAIL_REASON in log, log[-3000:]
    assert "Retry policy decision" in log

    # The policy says "retry" every time, but retries=1 caps it: try 2 ends FAILED.
    assert tis["policy_capped"]["state"] == "failed" and tis["policy_capped"]["try_number"] == 2, table
    assert [r["try_number"] for r in evals["policy_capped"]] == [1, 2]


# -- 2. clearing other task instances from a task -----------------------------------------------------


@pytest.mark.parametrize("variant", ["clear_nodown", "clear_down"])
def test_task_clears_other_task_instances(af, runs, recorder, variant):
    dag_id, run_id = runs[variant]
    api = af.client
    final = api.wait_for_dag_run(dag_id, run_id, timeout=240)
    tis = {(t["task_id"], t["map_index"]): t for t in api.task_instances(dag_id, run_id)}
    table = format_task_instances(tis.values())
    assert final["state"] == "success", af.describe_run(dag_id, run_id)

    (clear,) = _records(af, dag_id, run_id, "clear_mapped")
    include_downstream = clear["include_downstream"]
    assert include_downstream is (variant == "clear_down")
    cleared = sorted((c[0], c[1]) for c in clear["cleared"])

    # The mapped instance [1] re-ran (try 2); its siblings did not.
    assert tis[("mapped_target", 1)]["try_number"] == 2, table
    assert tis[("mapped_target", 0)]["try_number"] == 1 and tis[("mapped_target", 2)]["try_number"] == 1
    assert [r["map_index"] for r in _records(af, dag_id, run_id, "mapped_target_try")].count(1) == 2

    after_runs = len(_records(af, dag_id, run_id, "after_target_try"))
    if include_downstream:
        assert cleared == [("after_target", -1), ("mapped_target", 1)], clear
        assert tis[("after_target", -1)]["try_number"] == 2 and after_runs == 2, table
    else:
        assert cleared == [("mapped_target", 1)], clear
        assert tis[("after_target", -1)]["try_number"] == 1 and after_runs == 1, table

    rerun = tis[("mapped_target", 1)]
    called = parse_ts(clear["called_at"])
    latency_start = (parse_ts(rerun["start_date"]) - called).total_seconds()
    latency_end = (parse_ts(rerun["end_date"]) - called).total_seconds()
    api_call = (parse_ts(clear["returned_at"]) - called).total_seconds()
    print(
        f"\n[2 {variant}] clear call {api_call:.2f}s; cleared TI restarted after {latency_start:.1f}s, "
        f"succeeded after {latency_end:.1f}s; cleared={cleared}; "
        f"history mapped[1]={recorder.states(dag_id, run_id, 'mapped_target', 1)}"
    )
    assert 0 < latency_start < 60
    (clear_lr,) = _records(af, dag_id, run_id, "clear_running")

    # Clearing a RUNNING instance: RESTARTING at once; the supervisor learns it from its next heartbeat
    # and kills the task (on_kill runs in the task process); then a new try runs. The scheduler treats
    # the kill like a retry: on_retry_callback runs -- in the DAG processor, asynchronously.
    assert clear_lr["state_right_after"] == "restarting", clear_lr
    assert "restarting" in recorder.states(dag_id, run_id, "long_runner")
    lr = tis[("long_runner", -1)]
    assert lr["state"] == "success" and lr["try_number"] == 2, table
    # Unlike clearing a finished TI (max_tries = try_number + retries), clearing a RUNNING one does not
    # reset the retry budget: max_tries stays while try_number advances.
    assert clear["before"]["long_runner[-1]"] == ["running", 1, 2], clear["before"]
    assert lr["max_tries"] == 2, table
    (on_kill,) = _records(af, dag_id, run_id, "long_runner_on_kill")
    assert on_kill["where"] == "task_runner" and on_kill["try_number"] == 1, on_kill
    lr_on_retry = _wait_callback_records(af, "ft_e2e_clear_other.py", dag_id, run_id, "long_runner_on_retry")
    assert [(r["where"], r["try_number"]) for r in lr_on_retry] == [("dag_processor", 1)], lr_on_retry
    assert _records(af, dag_id, run_id, "long_runner_on_failure") == []
    lr_tries = _tries(af, dag_id, run_id, "long_runner")
    before_lr = clear["before"]["long_runner[-1]"]
    killed_after = (parse_ts(lr_tries[0]["end_date"]) - parse_ts(clear_lr["called_at"])).total_seconds()
    restarted_after = (parse_ts(lr_tries[1]["start_date"]) - parse_ts(clear_lr["called_at"])).total_seconds()
    print(
        f"[2 {variant}] long_runner: before clear (state, try, max_tries)={before_lr}, right after "
        f"clear max_tries={clear_lr['max_tries_right_after']}, final max_tries={lr['max_tries']}; "
        f"tries={[(t['try_number'], t['state']) for t in lr_tries]}; try 1 ended {killed_after:.1f}s and "
        f"try 2 started {restarted_after:.1f}s after the clear; on_retry_callback saw "
        f"{lr_on_retry[0].get('rest_state')} try {lr_on_retry[0].get('rest_try_number')}; "
        f"history={recorder.states(dag_id, run_id, 'long_runner')}"
    )


# -- 3. DateTimeTrigger deferral ---------------------------------------------------------------------


def test_defer_with_datetime_trigger(af, runs, recorder):
    dag_id, run_id = runs["defer"]
    api = af.client
    final = api.wait_for_dag_run(dag_id, run_id, timeout=180)
    assert final["state"] == "success", af.describe_run(dag_id, run_id)
    states = recorder.states(dag_id, run_id, "defer_until")
    assert "deferred" in states, states
    assert states.index("deferred") < len(states) - 1 and states[-1] == "success", states

    (ex,) = _records(af, dag_id, run_id, "defer_execute")
    (res,) = _records(af, dag_id, run_id, "defer_resume")
    target = parse_ts(ex["target"])
    resumed_at = res["t"]
    late = resumed_at - target.timestamp()
    print(f"\n[3] defer_until states {states}; resumed {late:.1f}s after the trigger time")
    assert late >= 0, (ex, res)
    assert late < 30
    assert res["try_number"] == ex["try_number"] == 1  # resuming is not a new try
    assert res["xcom_before_defer"] == ex["target"]  # XCom survives the deferral
    ti = api.task_instance(dag_id, run_id, "defer_until")
    assert ti["try_number"] == 1
    # The triggerer ran it: the trigger row is gone now, but the triggerer job is healthy.
    assert api.health()["triggerer"]["status"] == "healthy"


# -- 4. task_state_store vs XCom --------------------------------------------------------------------


def test_task_state_store_survives_retry_and_clear(af, runs):
    dag_id, run_id = runs["state"]
    api = af.client
    final = api.wait_for_dag_run(dag_id, run_id, timeout=180)
    assert final["state"] == "success", af.describe_run(dag_id, run_id)

    t1, t2 = _records(af, dag_id, run_id, "stateful_try")
    assert t1["try_number"] == 1 and t2["try_number"] == 2
    assert t1["store"] == {"k1": None, "k2": None, "k3": None}
    assert t2["store"]["k1"] == {"written_by_try": 1}, t2  # survived the retry
    assert t2["xcom"] == {"k1": None, "k2": None, "k3": None}, t2  # XCom of try 1 wiped
    assert t1["accessor"] == "airflow.sdk.execution_time.context.TaskStateStoreAccessor"

    assert api.task_state_store(dag_id, run_id, "stateful") == {
        "k1": {"written_by_try": 1},
        "k2": {"written_by_try": 2},
    }
    assert set(api.xcom_entries(dag_id, run_id, "stateful")) == {"k2", "return_value"}

    cleared = api.clear_task_instances(dag_id, run_id, ["stateful"])
    # The response lists the cleared TIs in their new state (None = to be scheduled again).
    assert [(c["task_id"], c["state"], c["try_number"]) for c in cleared] == [("stateful", None, 2)]
    api.wait_for_task_instance(
        dag_id,
        run_id,
        "stateful",
        predicate=lambda t: t["try_number"] == 3 and t["state"] == "success",
        timeout=120,
    )
    api.wait_for_dag_run(dag_id, run_id, timeout=60)
    t3 = _records(af, dag_id, run_id, "stateful_try")[2]
    assert t3["try_number"] == 3
    assert t3["store"] == {"k1": {"written_by_try": 1}, "k2": {"written_by_try": 2}, "k3": None}, t3
    assert t3["xcom"] == {"k1": None, "k2": None, "k3": None}, t3
    assert set(api.task_state_store(dag_id, run_id, "stateful")) == {"k1", "k2", "k3"}
    ti = api.task_instance(dag_id, run_id, "stateful")
    print(
        f"\n[4] after clear: try_number={ti['try_number']} max_tries={ti['max_tries']}; "
        f"store keys={sorted(api.task_state_store(dag_id, run_id, 'stateful'))}"
    )
    assert ti["max_tries"] == 3  # clear resets the budget: try_number (2) + retries (1)


# -- 6. callback timing ------------------------------------------------------------------------------


def test_callback_sees_ti_state(af, runs):
    dag_id, run_id = runs["callbacks"]
    api = af.client
    final = api.wait_for_dag_run(dag_id, run_id, timeout=180)
    assert final["state"] == "failed", af.describe_run(dag_id, run_id)
    (on_retry,) = _wait_callback_records(af, "ft_e2e_callbacks.py", dag_id, run_id, "on_retry")
    (on_failure,) = _wait_callback_records(af, "ft_e2e_callbacks.py", dag_id, run_id, "on_failure")
    print(
        f"\n[6] on_retry saw {on_retry.get('rest_state')} (try {on_retry['try_number']}), "
        f"on_failure saw {on_failure.get('rest_state')} (try {on_failure['try_number']})"
    )
    assert on_retry["try_number"] == 1 and on_retry["rest_state"] == "up_for_retry", on_retry
    assert on_failure["try_number"] == 2 and on_failure["rest_state"] == "running", on_failure
    assert on_retry["where"] == on_failure["where"] == "task_runner", (on_retry, on_failure)
    assert api.task_instance(dag_id, run_id, "fail_twice")["state"] == "failed"
