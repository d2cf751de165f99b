"""The run's history events are typed values with one codec (``recovery/journal_schema/events.py``):
every kind survives a round trip through its stored JSON unchanged, the JSON keys are the ones version 1
wrote, and what cannot be read is an ``InvalidEvent``, never an exception for its reader."""

from __future__ import annotations

import json

import pytest

from airflow_ft_provider.failover.classification import FailureKind, FailureLabels
from airflow_ft_provider.failover.strategy_state import ExponentialDelayState
from airflow_ft_provider.recovery.journal_events import (
    CheckpointRestored,
    CheckpointsTaken,
    FailoverRecorded,
    InvalidEvent,
    ManualRestart,
    OtherEvent,
    OutputsReused,
    RestartReconciled,
    WorkAdopted,
)
from airflow_ft_provider.recovery.journal_schema import decode_event, encode_event, event_from_json

EVENTS = [
    FailoverRecorded(
        time=10.5,
        task="score[1]",
        reason="restart its region",
        failed_task="score",
        try_number=2,
        restart=True,
        delay=4.0,
        restart_at=14.5,
        regions=(("enrich", "score[1]"),),
        tasks=("enrich", "score[1]"),
        unavailable=("scored[1]",),
        strategy="exponential-delay",
        scope="run",
        cause="RuntimeError: boom",
        labels=FailureLabels(True, FailureKind.INFRASTRUCTURE, "EXECUTOR_LOST"),
        backoff="attempt 2: 4 s",
        cleared=("enrich",),
        strategy_state=ExponentialDelayState(attempt=2),
    ),
    RestartReconciled(time=11.0, task="score", reason="finished the clears", cleared=("enrich",)),
    ManualRestart(
        time=12.0, task="up", reason="by hand", regions=(("up",), ("down",)), tasks=("down", "up"), user="ada"
    ),
    OutputsReused(time=13.0, task="down", try_number=3, reason="inputs identical"),
    WorkAdopted(time=14.0, task="down", try_number=2, reason="adopted try 1's output"),
    CheckpointRestored(
        time=15.0, task="agg", try_number=2, reason="resumed", restored_from=7, restored_via="store"
    ),
    CheckpointsTaken(
        time=16.0, task="agg", try_number=2, reason="3 taken", succeeded=True, statistics={"completed": 3}
    ),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.kind)
def test_every_kind_survives_its_stored_json(event):
    assert decode_event(encode_event(event), "k", 0.0, "bucket") == event


def test_the_stored_keys_are_version_1s():
    failover = json.loads(encode_event(EVENTS[0]))
    assert set(failover) == {
        "time", "kind", "task", "reason", "failed_task", "try_number", "restart", "delay", "restart_at",
        "regions", "tasks", "unavailable", "new_attempt", "strategy", "scope", "cause", "labels", "backoff",
        "cleared", "stopped", "strategy_state",
    }  # fmt: skip
    assert json.loads(encode_event(EVENTS[1])).keys() == {"time", "kind", "task", "cleared", "reason"}
    assert json.loads(encode_event(EVENTS[6]))["completed"] == 3  # statistics sit beside the fields


def test_an_event_without_a_kind_is_a_decision_and_an_unknown_kind_keeps_its_name():
    assert isinstance(event_from_json({"time": 1, "task": "A", "restart": True}), FailoverRecorded)
    newer = event_from_json({"time": 1, "kind": "paused", "task": "A", "reason": "newer release"})
    assert isinstance(newer, OtherEvent) and newer.to_json()["kind"] == "paused"


@pytest.mark.parametrize(
    "body",
    [b"[1]", b'{"kind": "manual"}', b'{"time": 1, "regions": ["A"]}', b'{"time": 1, "try_number": "2"}'],
)
def test_what_cannot_be_read_is_an_invalid_event_that_says_why(body):
    event = decode_event(body, "_failover/events/x.json", 99.0, "b")
    assert isinstance(event, InvalidEvent) and event.time == 99.0
    assert event.reason.startswith("recovery journal event s3://b/_failover/events/x.json is invalid (")
