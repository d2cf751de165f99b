"""Durations in Flink's notation, ported from Flink's TimeUtilsTest (flink-core/src/test/java/org/
apache/flink/util/TimeUtilsTest.java), plus the bounds that keep a duration usable at run time."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_ft_provider.failover import load_restart_strategy, parse_duration
from airflow_ft_provider.failover.durations import LATEST_TIME, representable, whole_millis


@pytest.mark.parametrize("text", ["1234", "1234ms", "1234 ms"])
def test_parse_duration_millis(text):
    # Flink: TimeUtilsTest.testParseDurationMillis
    assert whole_millis(parse_duration(text)) == 1234


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("667766s", 667766),
        ("667766 s", 667766),  # testParseDurationSeconds
        ("7657623min", 7657623 * 60),
        ("7657623 min", 7657623 * 60),  # testParseDurationMinutes
        ("987654h", 987654 * 3600),
        ("987654 h", 987654 * 3600),  # testParseDurationHours
    ],
)
def test_parse_duration_larger_units(text, seconds):
    # Flink: TimeUtilsTest.testParseDurationSeconds / Minutes / Hours
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text, seconds", [("1 MS", 0.001), ("1 S", 1), ("1 MIN", 60), ("1 H", 3600)])
def test_parse_duration_upper_case(text, seconds):
    # Flink: TimeUtilsTest.testParseDurationUpperCase
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["      155      ", "      155      ms   "])
def test_parse_duration_trim(text):
    # Flink: TimeUtilsTest.testParseDurationTrim
    assert whole_millis(parse_duration(text)) == 155


@pytest.mark.parametrize(
    "value, message",
    [
        (None, r"expected a duration, got None"),
        ("", r"cannot parse '' as a duration"),
        ("     ", r"cannot parse '     ' as a duration"),
        ("foobar or fubar or foo bazz", r"cannot parse"),
        ("16 gjah", r"unknown time unit 'gjah'"),
        ("16 16 17 18 ms", r"cannot parse"),
        ("-100 ms", r"not negative"),
    ],
)
def test_parse_duration_invalid(value, message):
    # Flink: TimeUtilsTest.testParseDurationInvalid
    with pytest.raises(ValueError, match=message):
        parse_duration(value)


def test_parse_duration_number_overflow():
    # Flink: TimeUtilsTest.testParseDurationNumberOverflow -- the number does not fit a Java long
    with pytest.raises(
        ValueError, match=r"the number in '1000000000000000000000000000000000 ms' does not fit a 64-bit"
    ):
        parse_duration("1000000000000000000000000000000000 ms")


def test_parse_duration_number_time_unit_overflow():
    # Flink: TimeUtilsTest.testParseDurationNumberTimeUnitOverflow -- the number fits, the duration
    # does not (Duration.of / toMillis overflow in Flink)
    with pytest.raises(ValueError, match=r"'100000000000000000 h' overflows a 64-bit count of milliseconds"):
        parse_duration("100000000000000000 h")


@pytest.mark.parametrize("value", ["987654 d", "365001 d", timedelta(days=999_999_999), 10**15])
def test_long_durations_are_accepted_as_flink_accepts_them(value):
    """Flink's TimeUtilsTest parses "987654 d"; only a 64-bit overflow of milliseconds is refused."""
    assert parse_duration(value) > 365_000 * 86_400 or value == 10**15


def test_a_long_duration_becomes_a_date_held_at_the_latest_time():
    """Where a duration becomes a date (a restart time, Airflow's retry delay, a time shown), it is
    held at LATEST_TIME: "100000000 d" waits that long, it never raises OverflowError mid-run."""
    now = datetime.now(timezone.utc).timestamp()
    restart_at = representable(now + parse_duration("100000000 d"))
    assert restart_at == LATEST_TIME
    assert datetime.fromtimestamp(restart_at, tz=timezone.utc).year == 9000
    assert representable(now + 10) == now + 10


def test_a_duration_overflowing_64_bit_milliseconds_names_the_key_when_the_dag_is_parsed():
    config = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "2000000000000 d"}
    with pytest.raises(
        ValueError,
        match=r"restart-strategy.fixed-delay.delay must be a duration ≥ 0, "
        r"got '2000000000000 d': .*overflows a 64-bit count of milliseconds",
    ):
        load_restart_strategy(config)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "9" * 400 + " ms"])
def test_non_finite_or_absurd_numbers_are_refused(value):
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize("text, millis", [("0.57 s", 570), ("1500 us", 1), ("999 us", 0), ("1.1 s", 1100)])
def test_whole_millis_truncates_exactly_like_duration_to_millis(text, millis):
    assert whole_millis(parse_duration(text)) == millis
