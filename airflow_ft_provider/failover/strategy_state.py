"""What a restart strategy remembers between failures (its budget), one frozen type per strategy, and
their JSON form in the run's journal.

Several worker processes share one strategy per run through the journal, so the state is data, not
the strategy object. Decoding is lenient: stored state that no strategy could restore becomes an
``UnreadableState`` that keeps what was read and why, and the error is raised only when a strategy
restores it (the failover page can still show a run whose budget is damaged).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, TypeAlias, TypeVar

from ..safe_json import is_finite_number


@dataclass(frozen=True)
class NoRestartState:
    type_name: ClassVar[str] = "none"


@dataclass(frozen=True)
class FixedDelayState:
    type_name: ClassVar[str] = "fixed-delay"
    failures: int = 0


@dataclass(frozen=True)
class FailureRateState:
    type_name: ClassVar[str] = "failure-rate"
    failure_times: tuple[float, ...] = ()  # seconds since the epoch, the newest last


@dataclass(frozen=True)
class ExponentialDelayState:
    type_name: ClassVar[str] = "exponential-delay"
    attempt: int = 0
    backoff: float = 0.0  # seconds: the backoff drawn for the current attempt
    failed_at: float | None = None  # seconds since the epoch
    restart_at: float | None = None  # seconds since the epoch; None before any failure


@dataclass(frozen=True)
class UnreadableState:
    """Stored state that no strategy can restore. ``found_type`` is its ``type`` as stored; ``problem``
    says what is wrong when the type is known but a field is not what that strategy writes."""

    stored: Mapping[str, object]
    found_type: object
    problem: str | None = None


StrategyState: TypeAlias = (
    NoRestartState | FixedDelayState | FailureRateState | ExponentialDelayState | UnreadableState
)
"""A restart strategy's mutable state (``RestartStrategy.export_state``)."""

Restorable = TypeVar("Restorable", NoRestartState, FixedDelayState, FailureRateState, ExponentialDelayState)
_NUMBER = (int, float)


def state_to_json(state: StrategyState) -> dict[str, object]:
    """The state as the journal stores it (version 1's keys); unreadable state exactly as it was read."""
    match state:
        case UnreadableState():
            return dict(state.stored)
        case NoRestartState():
            return {"type": state.type_name}
        case FixedDelayState():
            return {"type": state.type_name, "failures": state.failures}
        case FailureRateState():
            return {"type": state.type_name, "failure_times": list(state.failure_times)}
        case ExponentialDelayState():
            return {
                "type": state.type_name,
                "attempt": state.attempt,
                "backoff": state.backoff,
                "failed_at": state.failed_at,
                "restart_at": state.restart_at,
            }


def state_from_json(stored: Mapping[str, object]) -> StrategyState:
    """The typed state of a stored one; ``UnreadableState`` when no strategy wrote it so."""
    found = stored.get("type")

    def field(name: str, kind: type | tuple[type, ...]) -> object:
        value = stored.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            raise _Malformed(f"malformed {found} restart-strategy state: {name}={value!r}")
        return value

    try:
        if found == NoRestartState.type_name:
            return NoRestartState()
        if found == FixedDelayState.type_name:
            failures = field("failures", int)
            return FixedDelayState(failures if isinstance(failures, int) else 0)
        if found == FailureRateState.type_name:
            times = field("failure_times", list)
            times = times if isinstance(times, list) else []
            if not all(is_finite_number(t) for t in times):
                raise _Malformed(f"malformed failure-rate restart-strategy state: failure_times={times!r}")
            return FailureRateState(tuple(float(t) for t in times))
        if found == ExponentialDelayState.type_name:
            attempt, backoff = field("attempt", int), field("backoff", _NUMBER)
            failed_at, restart_at = field("failed_at", _NUMBER), field("restart_at", _NUMBER)
            return ExponentialDelayState(
                attempt if isinstance(attempt, int) else 0,
                float(backoff) if isinstance(backoff, _NUMBER) else 0.0,
                float(failed_at) if isinstance(failed_at, _NUMBER) else None,
                float(restart_at) if isinstance(restart_at, _NUMBER) else None,
            )
    except _Malformed as problem:
        return UnreadableState(stored, found, str(problem))
    return UnreadableState(stored, found)


def restorable(state: StrategyState, kind: type[Restorable]) -> Restorable:
    """``state`` if a strategy whose state is ``kind`` can restore it; ValueError saying why not."""
    if isinstance(state, kind):
        return state
    if isinstance(state, UnreadableState) and state.found_type == kind.type_name and state.problem:
        raise ValueError(state.problem)
    found = state.found_type if isinstance(state, UnreadableState) else state.type_name
    raise ValueError(
        f"cannot restore {kind.type_name} restart-strategy state from {found!r}; the run's "
        "stored state belongs to another strategy type (delete it to start counting afresh)"
    )


class _Malformed(ValueError):
    pass
