"""Flink's duration notation ("10 s", "1 min", "10000 ms", a bare number is milliseconds).

Numbers are read exactly (``Decimal``), as Flink reads them into a ``long``: a number or a duration
that overflows 64 bits is an error, like Flink's ``TimeUtils.parseDuration`` and ``Duration.toMillis``.
Durations are also bounded by ``MAX_DURATION`` so that a restart time computed from one is always a
valid date: "2000000000 d" fails when the DAG is parsed, not with an ``OverflowError`` mid-run.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal, InvalidOperation

# Unit spellings accepted by Flink's TimeUtils.parseDuration, in nanoseconds (exact).
_UNITS: dict[str, int] = {}
for _names, _nanos in (
    (("d", "day", "days"), 86_400 * 10**9),
    (("h", "hour", "hours"), 3_600 * 10**9),
    (("min", "m", "minute", "minutes"), 60 * 10**9),
    (("s", "sec", "secs", "second", "seconds"), 10**9),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 10**6),
    (("us", "µs", "micro", "micros", "microsecond", "microseconds"), 10**3),
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1),
):
    for _name in _names:
        _UNITS[_name] = _nanos

_DURATION = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*([a-zµ]*)\s*\Z", re.IGNORECASE)

JAVA_LONG_MAX = 2**63 - 1
# About 1000 years: far beyond any sensible delay or retention, yet now + MAX_DURATION stays a valid
# date (datetime ends at year 9999) and a valid timedelta, and Flink's own examples ("987654 h") fit.
MAX_DURATION_DAYS = 365_000
MAX_DURATION = MAX_DURATION_DAYS * 86_400.0  # seconds

DURATION_HELP = (
    'write a number with a unit, e.g. "10 s", "1 min", "500 ms", "1 h" (a bare number is milliseconds)'
)


def parse_duration(value: object) -> float:
    """Return the duration in seconds; raises ValueError (without the key, the caller adds it)."""
    seconds = _exact_seconds(value)
    if seconds < 0:
        raise ValueError(f"a duration must be finite and not negative, got {value!r}")
    if seconds * 1000 > JAVA_LONG_MAX:
        raise ValueError(
            f"the duration {value!r} overflows a 64-bit count of milliseconds (Flink rejects it too); "
            f"use at most {MAX_DURATION_DAYS} d"
        )
    if seconds > Decimal(MAX_DURATION_DAYS * 86_400):
        raise ValueError(
            f"the duration {value!r} is longer than the maximum of {MAX_DURATION_DAYS} d (about 1000 years), "
            "beyond which a restart or clean-up time would not be a valid date; use a shorter duration"
        )
    return float(seconds)


def _exact_seconds(value: object) -> Decimal:
    if isinstance(value, timedelta):
        return Decimal(value.days * 86_400 + value.seconds) + Decimal(value.microseconds) / 10**6
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}; {DURATION_HELP}")
    if isinstance(value, (int, float)):
        try:
            millis = Decimal(value if isinstance(value, int) else repr(value))
        except InvalidOperation:
            raise ValueError(f"a duration must be finite and not negative, got {value!r}") from None
        if not millis.is_finite():
            raise ValueError(f"a duration must be finite and not negative, got {value!r}")
        return millis / 1000
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"cannot parse {value!r} as a duration; {DURATION_HELP}")
        number, unit = match.groups()
        unit = unit.lower() or "ms"
        if unit not in _UNITS:
            raise ValueError(f"unknown time unit {unit!r} in {value!r}; {DURATION_HELP}")
        if abs(Decimal(number)) > JAVA_LONG_MAX:
            raise ValueError(
                f"the number in {value!r} does not fit a 64-bit integer (Flink rejects it too); "
                f"use at most {MAX_DURATION_DAYS} d"
            )
        return Decimal(number) * _UNITS[unit] / 10**9
    raise ValueError(f"expected a duration, got {value!r}; {DURATION_HELP}")


def whole_millis(seconds: float) -> int:
    """The duration in whole milliseconds, truncated like Java's ``Duration.toMillis()`` (Flink's
    restart strategies count in milliseconds): 1.5 ms is 1 ms. Exact for values parsed from text."""
    return int(Decimal(repr(float(seconds))) * 1000)


def format_duration(seconds: float) -> str:
    """The shortest exact Flink spelling of a duration, for messages and reprs ("10 s", "1 min")."""
    millis = round(seconds * 1000)
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if millis and millis % size == 0:
            return f"{millis // size} {unit}"
    return f"{millis} ms"
