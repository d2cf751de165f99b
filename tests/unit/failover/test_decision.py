"""Decisions are made by their factories and guard their state, as Flink's FailureHandlingResult does."""

import pytest

from airflow_ft_provider.failover.decision import FailoverDecision, IllegalDecisionState, Outcome, TryKey


def test_an_unrecoverable_decision_has_no_tasks_or_delay_to_give():
    decision = FailoverDecision.unrecoverable(
        TryKey("C", 3), cause="RuntimeError: x", decided_at=10.0, strategy="NoRestart", scope="run"
    )
    assert decision.outcome is Outcome.SUPPRESSED and not decision.restart
    for name in ("tasks", "regions", "delay", "restart_at"):
        with pytest.raises(IllegalDecisionState, match=r"unrecoverable decision \(C#3\)"):
            getattr(decision, name)
    assert decision.unavailable == () and decision.new_attempt is False


def test_a_restartable_decision_restarts_its_regions_after_its_delay():
    decision = FailoverDecision.restartable(
        TryKey("C", 1),
        cause="boom",
        decided_at=100.0,
        regions=(frozenset({"C"}), frozenset({"B", "B2"})),
        delay=4.5,
        unavailable=("b",),
        new_attempt=True,
        strategy="FixedDelay",
        scope="run",
    )
    assert decision.tasks == {"B", "B2", "C"} and decision.restart_at == 104.5
    assert decision.replayed().already_handled and not decision.already_handled


def test_a_try_stopped_by_failover_restarts_nothing_itself_and_waits_for_nothing():
    decision = FailoverDecision.stopped_by_failover(TryKey("D", 1), cause="killed", decided_at=5.0)
    assert decision.superseded and decision.restart
    assert decision.tasks == frozenset() and decision.delay == 0.0


@pytest.mark.parametrize("text", ["C", "C#", "C#x", "#1", "C#-1"])
def test_a_try_key_parses_only_task_hash_try(text):
    with pytest.raises(ValueError):
        TryKey.parse(text)
    assert TryKey.parse("score[3]#12") == TryKey("score[3]", 12) and str(TryKey("a#b", 2)) == "a#b#2"
