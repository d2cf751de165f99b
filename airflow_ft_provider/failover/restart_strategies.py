"""Restart strategies answer *whether and when* a failed run may restart (Flink's backoff strategies).

Each strategy is fed every failure through ``notify_failure`` and then asked ``can_restart`` and
``backoff_seconds``. Time and randomness are injected; their state (``strategy_state.py``) is data, so
that several worker processes can share one strategy per run.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from .backoff import Backoff, FixedBackoff, NoBackoff, RateBackoff
from .clock import Clock, now_millis
from .durations import format_duration, whole_millis
from .strategy_state import (
    FailureRateState,
    FixedDelayState,
    NoRestartState,
    StrategyState,
    restorable,
)


class RestartStrategy(Protocol):
    type_name: str

    def notify_failure(self) -> bool:
        """Record a failure now; True when it starts a new restart attempt (False when merged)."""

    def can_restart(self) -> bool:
        """Whether the failures seen so far still allow a restart."""

    def backoff_seconds(self) -> float:
        """How long to wait, from now, before restarting."""

    def export_state(self) -> StrategyState:
        """The strategy's mutable state."""

    def restore_state(self, state: StrategyState) -> None:
        """Replace the mutable state with one produced by ``export_state`` (ValueError if another
        strategy's, or unreadable)."""

    def last_backoff(self) -> Backoff:
        """How the last failure's backoff was made (asked right after ``notify_failure``)."""


class NoRestartStrategy:
    """Never restart (``none``, ``off``, ``disable``)."""

    type_name = NoRestartState.type_name

    def notify_failure(self) -> bool:
        return True

    def can_restart(self) -> bool:
        return False

    def backoff_seconds(self) -> float:
        return 0.0

    def export_state(self) -> StrategyState:
        return NoRestartState()

    def restore_state(self, state: StrategyState) -> None:
        restorable(state, NoRestartState)

    def last_backoff(self) -> Backoff:
        return NoBackoff()

    def __repr__(self) -> str:
        return "NoRestart()"


class FixedDelayRestartStrategy:
    """Restart while failures ≤ attempts, each after the same delay."""

    type_name = FixedDelayState.type_name

    def __init__(self, attempts: int, delay: float) -> None:
        self.attempts = attempts
        self.delay = delay
        self._delay_ms = whole_millis(delay)
        self._failures = 0

    def notify_failure(self) -> bool:
        self._failures += 1
        return True

    def can_restart(self) -> bool:
        return self._failures <= self.attempts

    def backoff_seconds(self) -> float:
        return self._delay_ms / 1000

    def export_state(self) -> StrategyState:
        return FixedDelayState(self._failures)

    def restore_state(self, state: StrategyState) -> None:
        state = restorable(state, FixedDelayState)
        self._failures = state.failures

    def last_backoff(self) -> Backoff:
        return FixedBackoff(self._failures, self.attempts, self.delay)

    def __repr__(self) -> str:
        return f"FixedDelay(attempts={self.attempts}, delay={format_duration(self.delay)})"


class FailureRateRestartStrategy:
    """Restart unless more than max-failures-per-interval failures fall inside the interval."""

    type_name = FailureRateState.type_name

    def __init__(
        self, max_failures_per_interval: int, interval: float, delay: float, *, clock: Clock
    ) -> None:
        self.max_failures_per_interval = max_failures_per_interval
        self.interval = interval
        self.delay = delay
        self._interval_ms = whole_millis(interval)
        self._delay_ms = whole_millis(delay)
        self._clock = clock
        # Flink keeps the last max-failures-per-interval + 1 failure times, in milliseconds.
        self._failures: deque[int] = deque(maxlen=max_failures_per_interval + 1)

    def notify_failure(self) -> bool:
        self._failures.append(now_millis(self._clock))
        return True

    def can_restart(self) -> bool:
        if len(self._failures) < self._failures.maxlen:  # type: ignore[operator]
            return True
        return now_millis(self._clock) - self._failures[0] > self._interval_ms

    def backoff_seconds(self) -> float:
        return self._delay_ms / 1000

    def export_state(self) -> StrategyState:
        return FailureRateState(tuple(t / 1000 for t in self._failures))

    def restore_state(self, state: StrategyState) -> None:
        state = restorable(state, FailureRateState)
        times = (round(t * 1000) for t in state.failure_times)
        self._failures = deque(times, maxlen=self.max_failures_per_interval + 1)

    def recent_failures(self) -> int:
        """How many of the remembered failures fall inside the interval now."""
        now = now_millis(self._clock)
        return sum(1 for t in self._failures if now - t <= self._interval_ms)

    def last_backoff(self) -> Backoff:
        return RateBackoff(self.delay)

    def __repr__(self) -> str:
        return (
            f"FailureRate(max-failures-per-interval={self.max_failures_per_interval}, "
            f"failure-rate-interval={format_duration(self.interval)}, delay={format_duration(self.delay)})"
        )
