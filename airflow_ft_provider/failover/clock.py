"""Time as an injected dependency, so restart strategies can be tested with exact sequences."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (or any fixed origin; strategies only compare differences)."""


class SystemClock:
    """Wall-clock time. Wall time, not monotonic, because strategy state is shared between processes."""

    def now(self) -> float:
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


def now_millis(clock: Clock) -> int:
    """The clock's time in whole milliseconds, the unit of Flink's restart strategies. Rounded, not
    truncated, so that a ManualClock advanced by 0.57 s reads 570 ms despite binary floating point."""
    return round(clock.now() * 1000)


class ManualClock:
    """A clock that moves only when told to; for tests and simulations."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"ManualClock cannot go backwards, got advance({seconds!r})")
        self._now += seconds

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now!r})"
