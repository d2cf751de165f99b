"""A run's history events as stored JSON (``_failover/events/<time>-<task>.json``, one object each):
encoded from the typed events of ``journal_events.py``, decoded field by field. An event that cannot be
read is an ``InvalidEvent`` (with the reason and the fix), never an exception for its reader.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Mapping
from typing import TypedDict

from airflow_ft_provider.failover.classification import FailureLabels
from airflow_ft_provider.failover.decision import FailoverDecision
from airflow_ft_provider.failover.strategy_state import StrategyState, state_from_json
from airflow_ft_provider.recovery.journal_events import (
    CheckpointRestored,
    CheckpointsTaken,
    FailoverRecorded,
    InvalidEvent,
    JournalEvent,
    ManualRestart,
    OtherEvent,
    OutputsReused,
    RestartReconciled,
    StageExpanded,
    WorkAdopted,
)
from airflow_ft_provider.safe_json import is_finite_number, load_json

MAX_EVENT_BYTES = 256 * 1024


def failover_event(
    decision: FailoverDecision,
    *,
    time: float,
    task: str,
    reason: str,
    cleared: list[str],
    stopped: list[str],
    strategy_state: StrategyState | None,
) -> FailoverRecorded:
    """A decision as the run's history records it (the fields of ``decision_fields``)."""
    plan = decision.plan
    return FailoverRecorded(
        time=time,
        task=task,
        reason=reason,
        failed_task=decision.failed_task,
        try_number=decision.try_number,
        restart=decision.restart,
        delay=plan.delay if plan else 0.0,
        restart_at=plan.restart_at if plan else decision.decided_at,
        regions=tuple(tuple(sorted(r)) for r in plan.regions) if plan else (),
        tasks=tuple(sorted(plan.tasks)) if plan else (),
        unavailable=tuple(decision.unavailable),
        new_attempt=decision.new_attempt,
        strategy=decision.strategy,
        scope=decision.scope,
        cause=decision.cause,
        labels=decision.labels,
        backoff=plan.backoff if plan and plan.backoff else "",
        cleared=tuple(cleared),
        stopped=tuple(stopped),
        strategy_state=strategy_state,
    )


def encode_event(event: JournalEvent) -> bytes:
    return json.dumps(event.to_json()).encode()


def decode_event(data: bytes, key: str, stored_at: float, bucket: str) -> JournalEvent:
    """One stored event, checked field by field; an invalid one is an :class:`InvalidEvent` at its
    object's time, with the reason and the fix."""
    try:
        doc = load_json(data, max_bytes=MAX_EVENT_BYTES)
        if not isinstance(doc, dict):
            raise ValueError(f"expected an object, got {type(doc).__name__}")
        return event_from_json(doc)
    except ValueError as exc:
        why = f"recovery journal event s3://{bucket}/{key} is invalid ({exc}); delete or repair it"
        return InvalidEvent(time=stored_at, key=key, reason=why)


def event_from_json(doc: Mapping[str, object]) -> JournalEvent:
    """An event from its stored fields (absent ones take their defaults; a field of the wrong type is a
    ValueError). An event without a kind is a failover decision, as the first releases wrote them."""
    f = _Fields(doc)
    when = doc.get("time")
    if not is_finite_number(when):
        raise ValueError(f"'time' must be seconds since the epoch, got {reprlib.repr(when)}")
    assert isinstance(when, (int, float))
    common = _Common(time=float(when), task=f.text("task"), reason=f.text("reason"))
    kind = f.text("kind") or "failover"
    if kind == "failover":
        return FailoverRecorded(
            **common,
            failed_task=f.text("failed_task"),
            try_number=f.count("try_number"),
            restart=f.flag("restart"),
            delay=f.number("delay") or 0.0,
            restart_at=f.number("restart_at"),
            regions=f.regions("regions"),
            tasks=f.names("tasks"),
            unavailable=f.names("unavailable"),
            new_attempt=f.flag("new_attempt"),
            strategy=f.text("strategy"),
            scope=f.text("scope"),
            cause=f.text("cause"),
            labels=_event_labels(doc.get("labels")),
            backoff=f.loose_text("backoff"),
            cleared=f.names("cleared"),
            stopped=f.names("stopped"),
            strategy_state=f.state("strategy_state"),
        )
    if kind == "reconciled":
        return RestartReconciled(**common, cleared=f.names("cleared"))
    if kind == "manual":
        user = f.text("user") or None
        return ManualRestart(
            **common,
            regions=f.regions("regions"),
            tasks=f.names("tasks"),
            cleared=f.names("cleared"),
            user=user,
        )
    try_number = f.count("try_number")
    if kind in ("reused", "adopted"):
        return (OutputsReused if kind == "reused" else WorkAdopted)(**common, try_number=try_number)
    if kind == "checkpoint":
        restored_from, via = doc.get("restored_from"), doc.get("restored_via")
        return CheckpointRestored(
            **common,
            try_number=try_number,
            restored_from=restored_from if isinstance(restored_from, int) else None,
            restored_via=via if isinstance(via, str) else None,
        )
    if kind == "checkpoints":
        succeeded = doc.get("succeeded")
        statistics = {k: v for k, v in doc.items() if k not in _CHECKPOINTS_OWN}
        return CheckpointsTaken(
            **common,
            try_number=try_number,
            succeeded=succeeded if isinstance(succeeded, bool) else None,
            statistics=statistics,
        )
    if kind == "expanded":
        return StageExpanded(
            **common, try_number=try_number, count=f.count("count") or 0, previous=f.count("previous")
        )
    return OtherEvent(**common, named_kind=kind)


class _Common(TypedDict):
    time: float
    task: str
    reason: str


_CHECKPOINTS_OWN = frozenset({"time", "kind", "task", "reason", "try_number", "succeeded"})


class _Fields:
    """The typed getters of one stored event: absent is the default, the wrong type a ValueError."""

    def __init__(self, doc: Mapping[str, object]) -> None:
        self.doc = doc

    def _get(self, name: str, kinds: tuple[type, ...]) -> object:
        value = self.doc.get(name)  # None (JSON null) reads as absent
        wrong = not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds
        if value is not None and wrong:
            raise ValueError(f"{name!r} has the wrong type: {reprlib.repr(value)}")
        return value

    def text(self, name: str) -> str:
        value = self._get(name, (str,))
        return value if isinstance(value, str) else ""

    def loose_text(self, name: str) -> str:
        """A text field readers only show: anything else reads as none, as before it was checked."""
        value = self.doc.get(name)
        return value if isinstance(value, str) else ""

    def flag(self, name: str) -> bool:
        return self._get(name, (bool,)) is True

    def number(self, name: str) -> float | None:
        value = self._get(name, (int, float))
        return float(value) if isinstance(value, (int, float)) else None

    def count(self, name: str) -> int | None:
        value = self._get(name, (int,))
        return value if isinstance(value, int) else None

    def names(self, name: str) -> tuple[str, ...]:
        items = self._get(name, (list,)) or []
        assert isinstance(items, list)
        if not all(isinstance(item, str) for item in items):
            raise ValueError(f"{name!r} has the wrong shape: {reprlib.repr(items)}")
        return tuple(items)

    def regions(self, name: str) -> tuple[tuple[str, ...], ...]:
        items = self._get(name, (list,)) or []
        assert isinstance(items, list)
        if not all(isinstance(r, list) and all(isinstance(t, str) for t in r) for r in items):
            raise ValueError(f"{name!r} has the wrong shape: {reprlib.repr(items)}")
        return tuple(tuple(r) for r in items)

    def state(self, name: str) -> StrategyState | None:
        value = self._get(name, (dict, type(None)))
        return state_from_json(value) if isinstance(value, dict) else None


def _event_labels(value: object) -> FailureLabels | None:
    """A decision's labels as recorded (none before labels existed; unreadable ones are left out)."""
    if not isinstance(value, Mapping):
        return None
    try:
        return FailureLabels.from_dict(value)
    except ValueError:
        return None
