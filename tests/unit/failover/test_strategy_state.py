"""A restart strategy's state: typed per strategy, stored as version 1's JSON, unreadable state kept as
read and refused only when a strategy restores it."""

from __future__ import annotations

import json

import pytest

from airflow_ft_provider.failover import load_restart_strategy
from airflow_ft_provider.failover.clock import ManualClock
from airflow_ft_provider.failover.strategy_state import (
    ExponentialDelayState,
    FailureRateState,
    FixedDelayState,
    NoRestartState,
    UnreadableState,
    state_from_json,
    state_to_json,
)

STATES = [
    NoRestartState(),
    FixedDelayState(3),
    FailureRateState((1_700_000_000.5, 1_700_000_010.0)),
    ExponentialDelayState(2, 4.0, 1_700_000_000.0, 1_700_000_004.0),
    ExponentialDelayState(),
]


@pytest.mark.parametrize("state", STATES, ids=lambda s: type(s).__name__)
def test_every_state_round_trips_through_its_stored_json(state):
    stored = json.loads(json.dumps(state_to_json(state)))
    assert stored["type"] == state.type_name
    assert state_from_json(stored) == state


def test_the_stored_keys_are_version_1s():
    assert state_to_json(FixedDelayState(1)) == {"type": "fixed-delay", "failures": 1}
    assert state_to_json(FailureRateState((5.0,))) == {"type": "failure-rate", "failure_times": [5.0]}
    assert set(state_to_json(ExponentialDelayState())) == {
        "type",
        "attempt",
        "backoff",
        "failed_at",
        "restart_at",
    }


@pytest.mark.parametrize(
    "stored, refusal",
    [
        (
            {"type": "fixed-delay", "failures": "3"},
            "malformed fixed-delay restart-strategy state: failures='3'",
        ),
        (
            {"type": "fixed-delay", "failures": True},
            "malformed fixed-delay restart-strategy state: failures=True",
        ),
        ({"type": "failure-rate"}, "cannot restore fixed-delay restart-strategy state from 'failure-rate'"),
        ({"type": "from-a-newer-release", "x": 1}, "from 'from-a-newer-release'"),
        ({"failures": 1}, "from None"),
    ],
)
def test_unreadable_state_is_kept_as_read_and_refused_when_restored(stored, refusal):
    state = state_from_json(stored)
    if stored.get("type") in (None, "fixed-delay", "from-a-newer-release"):
        assert isinstance(state, UnreadableState)
        assert state_to_json(state) == stored  # written back unchanged, never "repaired"
    strategy = load_restart_strategy({"restart-strategy.type": "fixed-delay"}, clock=ManualClock())
    with pytest.raises(ValueError, match=refusal.replace("(", r"\(").replace(")", r"\)")):
        strategy.restore_state(state)


def test_failure_times_must_be_finite_numbers():
    state = state_from_json({"type": "failure-rate", "failure_times": [1.0, "soon"]})
    assert isinstance(state, UnreadableState)
    assert state.problem == "malformed failure-rate restart-strategy state: failure_times=[1.0, 'soon']"


def test_a_restored_budget_is_the_one_exported():
    clock = ManualClock(1_000)
    config = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "2"}
    first = load_restart_strategy(config, clock=clock)
    first.notify_failure()
    second = load_restart_strategy(config, clock=clock)
    second.restore_state(state_from_json(state_to_json(first.export_state())))
    second.notify_failure()
    second.notify_failure()
    assert second.export_state() == FixedDelayState(3) and not second.can_restart()
