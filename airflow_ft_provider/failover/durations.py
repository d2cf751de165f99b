"""Flink's duration notation ("10 s", "1 min", "10000 ms", a bare number is milliseconds).

Numbers are read exactly (``Decimal``), as Flink reads them into a ``long``: a number or a duration
that overflows 64 bits is an error, like Flink's ``TimeUtils.parseDuration`` and ``Duration.toMillis``.
As in Flink, any duration that fits 64 bits of milliseconds is accepted ("987654 d" is, as Flink's
TimeUtilsTest says). Where a duration becomes a date (a restart time, a retry's delay for Airflow, a
time shown), it is held at ``LATEST_TIME`` by ``representable``, so that "100000000 d" waits "forever"
instead of raising ``OverflowError`` mid-run.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
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
# The latest instant a duration is turned into (epoch seconds): far beyond any sensible restart time or
# retention, and a date every datetime (ending at year 9999) and Airflow's scheduler can hold.
LATEST_TIME = datetime(9000, 1, 1, tzinfo=timezone.utc).timestamp()

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
            "use a shorter duration"
        )
    return float(seconds)


def representable(epoch_seconds: float) -> float:
    """An instant computed from a duration, held at ``LATEST_TIME`` (a date everything can hold)."""
    return min(epoch_seconds, LATEST_TIME)


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
                "use a shorter duration"
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
