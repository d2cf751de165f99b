"""One failover decision per failure: restart budget shared across workers through JSON state.

The state goes through the journal's JSON codec between failures (``recovery/journal_schema.py``), as it
does between workers; the sentences come from ``recovery/wording.py``.
"""

import json
import random

import pytest

from airflow_ft_provider.failover import ManualClock, ResultPartitionType, StageGraph
from airflow_ft_provider.failover.classification import FailureKind, FailureLabels
from airflow_ft_provider.failover.decision import IllegalDecisionState, Outcome, TryKey
from airflow_ft_provider.failover.failover_strategies import RestartPipelinedRegionFailoverStrategy
from airflow_ft_provider.failover.failure_handler import ExecutionFailureHandler, Failure
from airflow_ft_provider.recovery import journal_schema
from airflow_ft_provider.recovery.pending import PendingRestart, RunState
from airflow_ft_provider.recovery.wording import decision_reason, describe_backoff

FIXED_2 = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 2,
    "restart-strategy.fixed-delay.delay": "10 s",
}


@pytest.fixture
def seed_002():
    """A --a--> B --b--> C, B --b--> D (all blocking)."""
    graph = StageGraph()
    for stage in "ABCD":
        graph.add_stage(stage)
    graph.add_result("a", "A", ResultPartitionType.BLOCKING)
    graph.add_result("b", "B", ResultPartitionType.BLOCKING)
    graph.consume("B", "a")
    graph.consume("C", "b")
    graph.consume("D", "b")
    return RestartPipelinedRegionFailoverStrategy(graph)


def fail(state, failover, task, try_number, clock, config=FIXED_2, *, unavailable=(), labels=None, **handler):
    """Simulates one worker: load the stored JSON, decide, store it back."""
    loaded = journal_schema.decode(journal_schema.encode(state))
    core = ExecutionFailureHandler(
        failover, config, clock=clock, rng=random.Random(1), describe_backoff=describe_backoff, **handler
    )
    failure = Failure(task, try_number, "RuntimeError: boom", tuple(unavailable), labels)
    decision = core.handle(loaded, failure, being_ended=loaded.being_ended())
    return decision, loaded


def test_restart_budget_is_shared_by_the_whole_run(seed_002):
    clock = ManualClock(100)
    state = RunState()
    first, state = fail(state, seed_002, "C", 1, clock)
    assert first.restart and first.tasks == {"C"} and first.delay == 10
    assert state.not_before == {"C": 110}
    clock.advance(20)
    second, state = fail(state, seed_002, "D", 1, clock)  # another region, same budget
    assert second.restart
    clock.advance(20)
    third, state = fail(state, seed_002, "C", 2, clock)
    assert not third.restart
    assert decision_reason(third) == "Recovery is suppressed by FixedDelay(attempts=2, delay=10 s)"


def test_per_region_budgets_are_independent(seed_002):
    clock = ManualClock()
    state = RunState()
    for task, try_number in (("C", 1), ("C", 2)):
        _, state = fail(state, seed_002, task, try_number, clock, per_region=True)
        clock.advance(60)
    decision, state = fail(state, seed_002, "D", 1, clock, per_region=True)
    assert decision.restart and decision.scope == "region:D"
    decision, state = fail(state, seed_002, "C", 3, clock, per_region=True)
    assert not decision.restart


def test_backtracking_decision_names_regions_and_lost_partitions(seed_002):
    clock = ManualClock(0)
    decision, state = fail(state := RunState(), seed_002, "C", 1, clock, unavailable=["b"])
    assert decision.regions == (frozenset({"C"}), frozenset({"B"}), frozenset({"D"}))
    assert decision.tasks == {"B", "C", "D"}
    assert state.not_before == {"B": 10.0, "C": 10.0, "D": 10.0}
    assert decision_reason(decision) == (
        "C failed (RuntimeError: boom); restarting 3 region(s) [C]; [B]; [D] after 10 s (next try not "
        "before 00:00:10 UTC: fixed-delay, restart 1 of 2: 10 s); unavailable partitions: b; strategy "
        "FixedDelay(attempts=2, delay=10 s)"
    )
    reloaded = journal_schema.decode(journal_schema.encode(state)).decisions[TryKey("C", 1)]
    assert reloaded.plan.backoff == "fixed-delay, restart 1 of 2: 10 s"  # kept in the journal


def test_the_same_failure_handled_twice_counts_once(seed_002):
    clock = ManualClock()
    state = RunState()
    first, state = fail(state, seed_002, "C", 1, clock)
    again, state = fail(state, seed_002, "C", 1, clock)  # e.g. policy ran, then crash reconciliation
    assert again.already_handled and again.restart_at == first.restart_at
    assert state.strategies["run"].failures == 1


def test_merged_exponential_failures_share_one_restart_time(seed_002):
    config = {
        "restart-strategy.type": "exponential-delay",
        "restart-strategy.exponential-delay.initial-backoff": "4 s",
        "restart-strategy.exponential-delay.jitter-factor": 0,
    }
    clock = ManualClock(1000)
    state = RunState()
    first, state = fail(state, seed_002, "C", 1, clock, config=config)
    clock.advance(1)
    second, state = fail(state, seed_002, "D", 1, clock, config=config)
    assert first.new_attempt and not second.new_attempt
    assert second.restart_at == first.restart_at == 1004
    assert "merged into the restart already scheduled" in decision_reason(second)


def test_corrupt_state_is_a_clear_error():
    with pytest.raises(ValueError, match="recovery state is not JSON"):
        journal_schema.decode(b"{nope")
    with pytest.raises(ValueError, match="unsupported recovery state version 7"):
        journal_schema.decode(b'{"version": 7}')


def test_a_try_stopped_by_a_failover_restart_is_not_a_new_failure(seed_002):
    # D was running when C's failover cleared it; killing D made its try fail. That is not a failure.
    clock = ManualClock()
    state = RunState()
    state.superseded["D"] = 1
    decision, state = fail(state, seed_002, "D", 1, clock)
    assert decision.superseded and decision.tasks == frozenset()
    assert "stopped by a failover restart" in decision_reason(decision)
    assert state.strategies == {} and state.not_before == {}
    decision, state = fail(state, seed_002, "D", 2, clock)  # a real failure of the next try counts
    assert not decision.superseded and decision.tasks == {"D"}


def test_a_failure_of_a_try_a_pending_restart_is_about_to_end_is_not_a_new_failure(seed_002):
    # C's failure decided to restart B, C and D; before its clears reached D, D failed on the same lost
    # partition. That restart ends D's try anyway: D's failure must not restart B a second time.
    clock = ManualClock(100)
    state = RunState()
    first, state = fail(state, seed_002, "C", 1, clock, unavailable={"b"})
    assert first.tasks == {"B", "C", "D"}
    state.pending[TryKey("C", 1)] = PendingRestart(("B", "D"), decided_at=100.0)
    decision, state = fail(state, seed_002, "D", 1, clock, unavailable={"b"})
    assert decision.superseded and decision.tasks == frozenset()
    assert state.handled == {"C": 1}
    # Once the clear has ended D's try 1, a failure of its next try is a failure again.
    state.pending[TryKey("C", 1)] = state.pending[TryKey("C", 1)].ending("B", 1).ending("D", 1)
    state.superseded.update({"B": 1, "D": 1})
    decision, state = fail(state, seed_002, "D", 2, clock, unavailable={"b"})
    assert decision.restart and decision.tasks == {"B", "C", "D"}


def test_unfinished_restarts_survive_the_round_trip_and_malformed_ones_are_refused():
    state = RunState()
    state.pending[TryKey("C", 1)] = PendingRestart(
        ("B", "D"), 1000.0, {"B": 1}, abandoned=True, claimed_at=None
    )
    assert journal_schema.decode(journal_schema.encode(state)).pending == state.pending
    for bad in (
        {"tasks": "B", "decided_at": 1.0},
        {"tasks": ["B"], "decided_at": "soon"},
        {"tasks": ["B"], "decided_at": 1.0, "ended": {"B": -1}},
        ["B"],
    ):
        doc = json.loads(journal_schema.encode(state))
        doc["unfinished"]["C#1"] = bad
        with pytest.raises(ValueError, match=r"malformed recovery state: unfinished\['C#1'\]"):
            journal_schema.decode(json.dumps(doc).encode())


def test_a_non_recoverable_failure_restarts_nothing_and_counts_no_restart(seed_002):
    clock = ManualClock(100)
    bug = FailureLabels(
        False, FailureKind.USER_CODE, "UNRESOLVED_COLUMN.WITH_SUGGESTION", "an analysis error"
    )
    decision, state = fail(RunState(), seed_002, "C", 1, clock, labels=bug)
    assert decision.outcome is Outcome.NOT_RECOVERABLE and not decision.restart
    assert state.strategies == {} and state.not_before == {}  # the budget is untouched
    reloaded = journal_schema.decode(journal_schema.encode(state)).decisions[TryKey("C", 1)]
    assert reloaded.outcome is Outcome.NOT_RECOVERABLE and reloaded.labels == bug  # read back the same
    assert decision_reason(decision) == (
        "C try 1 failed (RuntimeError: boom) [user code, UNRESOLVED_COLUMN.WITH_SUGGESTION]: not "
        "recoverable, an analysis error; not restarted (no restart counted). Fix the cause, then clear "
        "the task or restart its region from the failover page"
    )
    with pytest.raises(IllegalDecisionState):
        _ = decision.tasks
    transient = FailureLabels(True, FailureKind.INFRASTRUCTURE)
    restarted, state = fail(state, seed_002, "D", 1, clock, labels=transient)
    assert restarted.restart and state.strategies["run"].failures == 1  # the first counted
    assert "[infrastructure]; restarting 1 region(s)" in decision_reason(restarted)
    again = journal_schema.decode(journal_schema.encode(state)).decisions[TryKey("D", 1)]
    assert again.labels == transient
