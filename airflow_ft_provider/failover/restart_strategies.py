"""Restart strategies answer *whether and when* a failed run may restart (Flink's backoff strategies).

Each strategy is fed every failure through ``notify_failure`` and then asked ``can_restart`` and
``backoff_seconds``. Time and randomness are injected; state round-trips through plain JSON so that
several worker processes can share one strategy per run.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol

from .clock import Clock, now_millis
from .durations import JAVA_LONG_MAX, format_duration, whole_millis

StrategyState = dict[str, object]
"""A restart strategy's mutable state as JSON-compatible data (its ``type`` and counters)."""


class RestartStrategy(Protocol):
    type_name: str

    def notify_failure(self) -> bool:
        """Record a failure now; True when it starts a new restart attempt (False when merged)."""

    def can_restart(self) -> bool:
        """Whether the failures seen so far still allow a restart."""

    def backoff_seconds(self) -> float:
        """How long to wait, from now, before restarting."""

    def export_state(self) -> StrategyState:
        """The strategy's mutable state as JSON-compatible data."""

    def restore_state(self, state: Mapping[str, Any]) -> None:
        """Replace the mutable state with one produced by ``export_state``."""

    def remaining_budget(self) -> str:
        """In plain words, how many more failures a restart follows (for the UI and logs)."""

    def explain_backoff(self) -> str:
        """How the last failure's backoff was made, e.g. ``exponential-delay, attempt 3: 4 s + jitter
        0.3 s`` (asked right after ``notify_failure``)."""


def _check_state(
    strategy: RestartStrategy, state: Mapping[str, Any], fields: Mapping[str, type | tuple[type, ...]]
) -> None:
    if not isinstance(state, Mapping) or state.get("type") != strategy.type_name:
        found = state.get("type") if isinstance(state, Mapping) else state
        raise ValueError(
            f"cannot restore {strategy.type_name} restart-strategy state from {found!r}; the run's "
            "stored state belongs to another strategy type (delete it to start counting afresh)"
        )
    for name, kind in fields.items():
        value = state.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            raise ValueError(f"malformed {strategy.type_name} restart-strategy state: {name}={value!r}")


class NoRestartStrategy:
    """Never restart (``none``, ``off``, ``disable``)."""

    type_name = "none"

    def notify_failure(self) -> bool:
        return True

    def can_restart(self) -> bool:
        return False

    def backoff_seconds(self) -> float:
        return 0.0

    def export_state(self) -> StrategyState:
        return {"type": self.type_name}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        _check_state(self, state, {})

    def remaining_budget(self) -> str:
        return "no restarts: the first failure fails the run"

    def explain_backoff(self) -> str:
        return "none: no restart"

    def __repr__(self) -> str:
        return "NoRestart()"


class FixedDelayRestartStrategy:
    """Restart while failures ≤ attempts, each after the same delay."""

    type_name = "fixed-delay"

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
        return {"type": self.type_name, "failures": self._failures}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        _check_state(self, state, {"failures": int})
        self._failures = int(state.get("failures", 0))

    def remaining_budget(self) -> str:
        left = max(0, self.attempts - self._failures)
        return f"{left} of {self.attempts} restarts left ({self._failures} failures so far)"

    def explain_backoff(self) -> str:
        return f"fixed-delay, restart {self._failures} of {self.attempts}: {format_duration(self.delay)}"

    def __repr__(self) -> str:
        return f"FixedDelay(attempts={self.attempts}, delay={format_duration(self.delay)})"


class FailureRateRestartStrategy:
    """Restart unless more than max-failures-per-interval failures fall inside the interval."""

    type_name = "failure-rate"

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
        return {"type": self.type_name, "failure_times": [t / 1000 for t in self._failures]}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        _check_state(self, state, {"failure_times": list})
        times = state.get("failure_times", [])
        if not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) for t in times
        ):
            raise ValueError(f"malformed failure-rate restart-strategy state: failure_times={times!r}")
        self._failures = deque((round(t * 1000) for t in times), maxlen=self.max_failures_per_interval + 1)

    def remaining_budget(self) -> str:
        now = now_millis(self._clock)
        recent = sum(1 for t in self._failures if now - t <= self._interval_ms)
        left = max(0, self.max_failures_per_interval - recent)
        return (
            f"{left} more failures allowed within {format_duration(self.interval)} "
            f"({recent} of {self.max_failures_per_interval} in the last {format_duration(self.interval)})"
        )

    def explain_backoff(self) -> str:
        return f"failure-rate: {format_duration(self.delay)}"

    def __repr__(self) -> str:
        return (
            f"FailureRate(max-failures-per-interval={self.max_failures_per_interval}, "
            f"failure-rate-interval={format_duration(self.interval)}, delay={format_duration(self.delay)})"
        )


class ExponentialDelayRestartStrategy:
    """Backoff grows by a multiplier per attempt, with jitter, up to a maximum; resets after quiet time.

    As Flink's ExponentialDelayRestartBackoffTimeStrategy (1.19+), in whole milliseconds: the backoff
    of attempt k (from 0) is ``(long) (initial · multiplier^k)``, not capped; a whole-millisecond
    jitter drawn uniformly from ``±(long) (backoff · jitter-factor)`` is added, and only then the sum is
    clamped to [initial-backoff, max-backoff]. Failures at or before the scheduled restart time are
    merged into that restart (concurrent failures of one incident count once); when at least
    reset-backoff-threshold passed since the scheduled restart, the attempt counter starts again.
    """

    type_name = "exponential-delay"

    def __init__(
        self,
        *,
        initial_backoff: float,
        max_backoff: float,
        backoff_multiplier: float,
        reset_backoff_threshold: float,
        jitter_factor: float,
        attempts_before_reset_backoff: float,
        clock: Clock,
        rng: random.Random,
    ) -> None:
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.backoff_multiplier = backoff_multiplier
        self.reset_backoff_threshold = reset_backoff_threshold
        self.jitter_factor = jitter_factor
        self.attempts_before_reset_backoff = attempts_before_reset_backoff
        self._initial_ms = whole_millis(initial_backoff)
        self._max_ms = whole_millis(max_backoff)
        self._reset_ms = whole_millis(reset_backoff_threshold)
        _require(self._initial_ms >= 1, "initial-backoff must be at least 1 ms", initial_backoff)
        _require(self._max_ms >= self._initial_ms, "max-backoff must be ≥ initial-backoff", max_backoff)
        _require(backoff_multiplier > 1, "backoff-multiplier must be > 1", backoff_multiplier)
        _require(
            self._reset_ms >= 1, "reset-backoff-threshold must be at least 1 ms", reset_backoff_threshold
        )
        _require(0 <= jitter_factor <= 1, "jitter-factor must be between 0 and 1", jitter_factor)
        _require(
            attempts_before_reset_backoff >= 1,
            "attempts-before-reset-backoff must be ≥ 1",
            attempts_before_reset_backoff,
        )
        self._clock = clock
        self._rng = rng
        self._attempt = 0
        self._backoff_ms = 0  # the backoff drawn for the current attempt (shown in the run's state)
        self._drawn: tuple[int, int] = (0, 0)  # the last backoff before jitter, and its jitter (words only)
        self._failed_at_ms: int | None = None
        self._restart_at_ms: int | None = None  # Flink's nextRestartTimestamp; None before any failure

    @property
    def attempt(self) -> int:
        return self._attempt

    def notify_failure(self) -> bool:
        now = now_millis(self._clock)
        if self._restart_at_ms is not None:
            if now <= self._restart_at_ms:
                return False  # merged into the restart already scheduled
            if now - self._restart_at_ms >= self._reset_ms:
                self._attempt = 0
        self._backoff_ms = self._next_backoff_ms()
        self._failed_at_ms = now
        self._restart_at_ms = now + self._backoff_ms
        self._attempt += 1
        return True

    def _next_backoff_ms(self) -> int:
        try:
            raw = self._initial_ms * self.backoff_multiplier**self._attempt
        except OverflowError:  # Java's Math.pow gives Infinity here
            raw = math.inf
        backoff = _java_long(raw)
        jitter = 0
        if self.jitter_factor != 0:
            offset = _java_long(backoff * self.jitter_factor)
            jitter = self._rng.randint(-offset, offset)
        self._drawn = (backoff, jitter)
        # Python integers do not wrap around where Java's long addition would (backoffs near 2^63 ms).
        return max(self._initial_ms, min(backoff + jitter, self._max_ms))

    def can_restart(self) -> bool:
        return self._attempt <= self.attempts_before_reset_backoff

    def backoff_seconds(self) -> float:
        if self._restart_at_ms is None:
            raise RuntimeError(
                "exponential-delay backoff asked before any failure: call notify_failure() first "
                "(Flink: 'Please call notifyFailure first.')"
            )
        return max(0, self._restart_at_ms - now_millis(self._clock)) / 1000

    def export_state(self) -> StrategyState:
        return {
            "type": self.type_name,
            "attempt": self._attempt,
            "backoff": self._backoff_ms / 1000,
            "failed_at": None if self._failed_at_ms is None else self._failed_at_ms / 1000,
            "restart_at": None if self._restart_at_ms is None else self._restart_at_ms / 1000,
        }

    def restore_state(self, state: Mapping[str, Any]) -> None:
        number = (int, float)
        _check_state(
            self, state, {"attempt": int, "backoff": number, "failed_at": number, "restart_at": number}
        )
        self._attempt = int(state.get("attempt", 0))
        self._backoff_ms = _millis_of(state.get("backoff")) or 0
        self._failed_at_ms = _millis_of(state.get("failed_at"))
        self._restart_at_ms = _millis_of(state.get("restart_at"))

    def remaining_budget(self) -> str:
        quiet = format_duration(self.reset_backoff_threshold)
        if math.isinf(self.attempts_before_reset_backoff):
            return (
                f"unlimited restarts; {self._attempt} so far, the backoff resets after {quiet} "
                "without failure"
            )
        left = max(0, int(self.attempts_before_reset_backoff) - self._attempt)
        return (
            f"{left} of {int(self.attempts_before_reset_backoff)} restarts left; "
            f"the count resets after {quiet} without failure"
        )

    def explain_backoff(self) -> str:
        backoff, jitter = self._drawn
        sign = "+" if jitter >= 0 else "−"
        text = f"exponential-delay, attempt {self._attempt}: {format_duration(backoff / 1000)}"
        if self.jitter_factor:
            text += f" {sign} jitter {format_duration(abs(jitter) / 1000)}"
        if self._backoff_ms != backoff + jitter:
            bound = "max-backoff" if self._backoff_ms == self._max_ms else "initial-backoff"
            text += f", held to {bound} {format_duration(self._backoff_ms / 1000)}"
        return text

    def __repr__(self) -> str:
        attempts = self.attempts_before_reset_backoff
        return (
            f"ExponentialDelay(initial-backoff={format_duration(self.initial_backoff)}, "
            f"max-backoff={format_duration(self.max_backoff)}, "
            f"backoff-multiplier={self.backoff_multiplier:g}, "
            f"reset-backoff-threshold={format_duration(self.reset_backoff_threshold)}, "
            f"jitter-factor={self.jitter_factor:g}, "
            f"attempts-before-reset-backoff={'infinite' if math.isinf(attempts) else int(attempts)})"
        )


def _java_long(value: float) -> int:
    """Java's ``(long)`` cast of a non-negative double: truncated, saturating at Long.MAX_VALUE."""
    return JAVA_LONG_MAX if value >= JAVA_LONG_MAX else int(value)


def _millis_of(seconds: float | None) -> int | None:
    """A time stored in the run's state (seconds, JSON) back in the strategy's whole milliseconds."""
    if seconds is None:
        return None
    if not math.isfinite(seconds):
        raise ValueError(f"malformed exponential-delay restart-strategy state: time {seconds!r}")
    return round(seconds * 1000)


def _require(condition: bool, requirement: str, value: object) -> None:
    """Flink's checkArgument in the strategy's constructor (the loader names the key and the fix)."""
    if not condition:
        raise ValueError(f"restart-strategy.exponential-delay.{requirement}, got {value!r}")
