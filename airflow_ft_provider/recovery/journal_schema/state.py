"""The run's recovery state as stored JSON (``_failover/state.json``): versioned, validated on read.

Version 1 is the layout every release so far has written::

    {"version": 1, "strategies": {scope: {...}}, "not_before": {task: t}, "handled": {task: n},
     "decisions": {"task#try": {...}}, "superseded": {task: n},
     "unfinished": {"task#try": {"tasks": [...], "decided_at": t, "ended": {task: n},
                                 "abandoned": bool, "claimed_at": t | null}}}

Readers are kept per version, so a journal written by an earlier release stays readable after an
upgrade; anything else is a ``ValueError`` that says what is wrong (never a NaN restart time or a
``RecursionError``). Workers of the old and the new release may share a run during a rolling upgrade:
the writer keeps every field the version-1 reader needs.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Callable, Mapping
from typing import TypeVar

from airflow_ft_provider.failover.classification import FailureLabels
from airflow_ft_provider.failover.decision import FailoverDecision, TryKey
from airflow_ft_provider.failover.strategy_state import StrategyState, state_from_json, state_to_json
from airflow_ft_provider.recovery.journal_schema.events import failover_event
from airflow_ft_provider.recovery.pending import PendingRestart, RunState
from airflow_ft_provider.safe_json import InvalidJson, is_finite_number, load_json

SCHEMA_VERSION = 1
MAX_STATE_BYTES = 1 << 20  # the journal's objects are read with this limit too
V = TypeVar("V")


# -- writing ----------------------------------------------------------------------------------------
def decision_fields(decision: FailoverDecision) -> dict[str, object]:
    """A decision as JSON (an unrecoverable one with no regions, no delay and its time): the decision's
    fields of its history event, so that the state and the history record a decision alike."""
    stored = failover_event(
        decision, time=0.0, task="", reason="", cleared=[], stopped=[], strategy_state=None
    ).to_json()
    return {name: value for name, value in stored.items() if name in DECISION_FIELDS}


DECISION_FIELDS = frozenset(
    {"failed_task", "try_number", "restart", "delay", "restart_at", "regions", "tasks", "unavailable"}
    | {"new_attempt", "strategy", "scope", "cause", "labels", "backoff"}
)


def encode(state: RunState) -> bytes:
    return json.dumps(
        {
            "version": SCHEMA_VERSION,
            "strategies": {scope: state_to_json(s) for scope, s in state.strategies.items()},
            "not_before": state.not_before,
            "handled": state.handled,
            "decisions": {str(key): decision_fields(d) for key, d in state.decisions.items()},
            "superseded": state.superseded,
            "unfinished": {str(key): _pending_fields(p) for key, p in state.pending.items()},
        },
        sort_keys=True,
    ).encode()


def _pending_fields(restart: PendingRestart) -> dict[str, object]:
    return {
        "tasks": list(restart.tasks),
        "decided_at": restart.decided_at,
        "ended": dict(restart.ended),
        "abandoned": restart.abandoned,
        "claimed_at": restart.claimed_at,
    }


# -- reading ----------------------------------------------------------------------------------------
def decode(data: bytes | None) -> RunState:
    """The stored state (empty when there is none), by the reader of its version."""
    if not data:
        return RunState()
    try:
        doc = load_json(data, max_bytes=MAX_STATE_BYTES)
    except InvalidJson as err:
        raise InvalidJson(
            f"the run's recovery state is not JSON ({err}); delete it to start afresh"
        ) from None
    version = doc.get("version") if isinstance(doc, dict) else doc
    reader = READERS.get(version) if isinstance(version, int) and not isinstance(version, bool) else None
    if reader is None or not isinstance(doc, dict):
        raise ValueError(
            f"unsupported recovery state version {reprlib.repr(version)}; expected one of {sorted(READERS)}"
        )
    return reader(doc)


def _read_v1(doc: Mapping[str, object]) -> RunState:
    def section(name: str) -> Mapping[str, object]:
        value = doc.get(name, {})
        if not isinstance(value, dict):
            raise ValueError(f"malformed recovery state: {name} must be an object, got {reprlib.repr(value)}")
        return value

    def each(name: str, check: Callable[[object, str], V]) -> dict[str, V]:
        return {key: check(value, f"{name}[{key!r}]") for key, value in section(name).items()}

    def keyed(name: str, check: Callable[[object, str], V]) -> dict[TryKey, V]:
        return {_try_key(key, name): check(value, f"{name}[{key!r}]") for key, value in section(name).items()}

    return RunState(
        strategies=each("strategies", _strategy_state),
        not_before=each("not_before", _number),
        handled=each("handled", _try_number),
        decisions=keyed("decisions", _decision),
        superseded=each("superseded", _try_number),
        pending=keyed("unfinished", _pending),
    )


READERS: dict[int, Callable[[Mapping[str, object]], RunState]] = {1: _read_v1}


def _object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise ValueError(f"malformed recovery state: {where} must be an object, got {reprlib.repr(value)}")
    return value


def _strategy_state(value: object, where: str) -> StrategyState:
    return state_from_json(_object(value, where))  # its strategy refuses what it cannot restore


def _try_key(text: str, name: str) -> TryKey:
    try:
        return TryKey.parse(text)
    except ValueError as err:
        raise ValueError(f"malformed recovery state: {name} key {err}") from None


def _decision(value: object, where: str) -> FailoverDecision:
    fields = _object(value, where)

    def text(name: str) -> str:
        got = fields.get(name, "")
        if not isinstance(got, str):
            raise ValueError(
                f"malformed recovery state: {where}[{name!r}] must be text, got {reprlib.repr(got)}"
            )
        return got

    def names(name: str) -> list[str]:
        got = fields.get(name, [])
        if not isinstance(got, list) or not all(isinstance(item, str) for item in got):
            raise ValueError(
                f"malformed recovery state: {where}[{name!r}] must list names, got {reprlib.repr(got)}"
            )
        return got

    regions = fields.get("regions", [])
    if not isinstance(regions, list) or not all(isinstance(r, list) for r in regions):
        raise ValueError(f"malformed recovery state: {where}['regions'] must list regions")
    key = TryKey(text("failed_task"), _try_number(fields.get("try_number"), f"{where}['try_number']"))
    restart_at = _number(fields.get("restart_at"), f"{where}['restart_at']")
    labels = _labels(fields.get("labels"), where)
    if fields.get("restart") is not True and labels is not None and not labels.recoverable:
        return FailoverDecision.not_recoverable(
            key, cause=text("cause"), decided_at=restart_at, labels=labels
        )
    common = {"cause": text("cause"), "strategy": text("strategy"), "scope": text("scope")}
    if fields.get("restart") is not True:
        return FailoverDecision.unrecoverable(key, decided_at=restart_at, labels=labels, **common)
    delay = _number(fields.get("delay"), f"{where}['delay']")
    return FailoverDecision.restartable(
        key,
        decided_at=restart_at - delay,
        restart_at=restart_at,
        regions=tuple(frozenset(_names_in(r, where)) for r in regions),
        delay=delay,
        unavailable=tuple(names("unavailable")),
        new_attempt=fields.get("new_attempt") is True,
        labels=labels,
        backoff=text("backoff")[:500],
        **common,
    )


def _labels(value: object, where: str) -> FailureLabels | None:
    """A decision's failure labels (absent in decisions taken before labels existed)."""
    if value is None:
        return None
    try:
        return FailureLabels.from_dict(_object(value, f"{where}['labels']"))
    except ValueError as err:
        raise ValueError(f"malformed recovery state: {where}['labels']: {err}") from None


def _names_in(region: list[object], where: str) -> list[str]:
    if not all(isinstance(task, str) for task in region):
        raise ValueError(f"malformed recovery state: {where}['regions'] must list task ids")
    return [str(task) for task in region]


def _pending(value: object, where: str) -> PendingRestart:
    entry = value if isinstance(value, dict) else {}
    tasks = entry.get("tasks")
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise ValueError(f"malformed recovery state: {where} must name its tasks, got {reprlib.repr(value)}")
    ended = entry.get("ended", {})  # task -> the try a clear attempt listed to end
    if not isinstance(ended, dict):
        got = reprlib.repr(ended)
        raise ValueError(f"malformed recovery state: {where}['ended'] must be an object, got {got}")
    claimed_at = entry.get("claimed_at")
    return PendingRestart(
        tasks=tuple(tasks),
        decided_at=_number(entry.get("decided_at"), f"{where}['decided_at']"),
        ended={task: _try_number(n, f"{where}['ended'][{task!r}]") for task, n in ended.items()},
        abandoned=entry.get("abandoned") is True,
        claimed_at=None if claimed_at is None else _number(claimed_at, f"{where}['claimed_at']"),
    )


def _number(value: object, where: str) -> float:
    # Only JSON numbers: float("nan") of a string would make a restart time that never compares.
    if not is_finite_number(value):
        raise ValueError(
            f"malformed recovery state: {where} must be a time in seconds, got {reprlib.repr(value)}"
        )
    assert isinstance(value, (int, float))
    return float(value)


def _try_number(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"malformed recovery state: {where} must be a try number ≥ 0, got {reprlib.repr(value)}"
        )
    return value
