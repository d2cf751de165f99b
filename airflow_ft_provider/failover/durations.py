"""Flink's duration notation ("10 s", "1 min", "10000 ms", a bare number is milliseconds)."""

from __future__ import annotations

import math
import re
from datetime import timedelta

# Unit spellings accepted by Flink's TimeUtils.parseDuration, in seconds.
_UNITS: dict[str, float] = {}
for _names, _seconds in (
    (("d", "day", "days"), 86400.0),
    (("h", "hour", "hours"), 3600.0),
    (("min", "m", "minute", "minutes"), 60.0),
    (("s", "sec", "secs", "second", "seconds"), 1.0),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1e-3),
    (("us", "µs", "micro", "micros", "microsecond", "microseconds"), 1e-6),
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1e-9),
):
    for _name in _names:
        _UNITS[_name] = _seconds

_DURATION = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*([a-zµ]*)\s*$", re.IGNORECASE)

DURATION_HELP = 'write a number with a unit, e.g. "10 s", "1 min", "500 ms", "1 h" (a bare number is milliseconds)'


def parse_duration(value: object) -> float:
    """Return the duration in seconds; raises ValueError (without the key, the caller adds it)."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}; {DURATION_HELP}")
    elif isinstance(value, (int, float)):
        seconds = float(value) / 1000.0
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"cannot parse {value!r} as a duration; {DURATION_HELP}")
        number, unit = match.groups()
        unit = unit.lower() or "ms"
        if unit not in _UNITS:
            raise ValueError(f"unknown time unit {unit!r} in {value!r}; {DURATION_HELP}")
        seconds = float(number) * _UNITS[unit]
    else:
        raise ValueError(f"expected a duration, got {value!r}; {DURATION_HELP}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"a duration must be finite and not negative, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest exact Flink spelling of a duration, for messages and reprs ("10 s", "1 min")."""
    millis = round(seconds * 1000)
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if millis and millis % size == 0:
            return f"{millis // size} {unit}"
    return f"{millis} ms"
