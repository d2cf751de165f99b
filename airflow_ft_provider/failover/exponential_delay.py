"""Flink's exponential-delay restart strategy (``ExponentialDelayRestartBackoffTimeStrategy``): a backoff that
grows by a multiplier up to a maximum, with jitter, and resets after a quiet period."""

from __future__ import annotations

import math
import random

from .backoff import Backoff, ExponentialBackoff
from .clock import Clock, now_millis
from .durations import JAVA_LONG_MAX, format_duration, whole_millis
from .strategy_state import ExponentialDelayState, StrategyState, restorable


class ExponentialDelayRestartStrategy:
    """Backoff grows by a multiplier per attempt, with jitter, up to a maximum; resets after quiet time.

    As Flink's ExponentialDelayRestartBackoffTimeStrategy (1.19+), in whole milliseconds: the backoff
    of attempt k (from 0) is ``(long) (initial · multiplier^k)``, not capped; a whole-millisecond
    jitter drawn uniformly from ``±(long) (backoff · jitter-factor)`` is added, and only then the sum is
    clamped to [initial-backoff, max-backoff]. Failures at or before the scheduled restart time are
    merged into that restart (concurrent failures of one incident count once); when at least
    reset-backoff-threshold passed since the scheduled restart, the attempt counter starts again.
    """

    type_name = ExponentialDelayState.type_name

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
        self._drawn: tuple[int, int] = (0, 0)  # the last backoff before jitter, and its jitter
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
        return ExponentialDelayState(
            self._attempt,
            self._backoff_ms / 1000,
            None if self._failed_at_ms is None else self._failed_at_ms / 1000,
            None if self._restart_at_ms is None else self._restart_at_ms / 1000,
        )

    def restore_state(self, state: StrategyState) -> None:
        state = restorable(state, ExponentialDelayState)
        self._attempt = state.attempt
        self._backoff_ms = _millis_of(state.backoff) or 0
        self._failed_at_ms = _millis_of(state.failed_at)
        self._restart_at_ms = _millis_of(state.restart_at)

    def last_backoff(self) -> Backoff:
        drawn, jitter = self._drawn
        held = None
        if self._backoff_ms != drawn + jitter:
            held = "max-backoff" if self._backoff_ms == self._max_ms else "initial-backoff"
        return ExponentialBackoff(
            self._attempt, drawn, jitter, self.jitter_factor != 0, self._backoff_ms, held
        )

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
