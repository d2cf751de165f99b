"""Restart-strategy configuration: Flink's keys, aliases, durations; every mistake named with its fix."""

from datetime import timedelta

import pytest

from airflow_ft_provider.failover import format_duration, load_restart_strategy, parse_duration

FD = "restart-strategy.fixed-delay."
FR = "restart-strategy.failure-rate."
ED = "restart-strategy.exponential-delay."


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("10 s", 10.0),
        ("1 min", 60.0),
        ("10000 ms", 10.0),
        ("6 min", 360.0),
        ("1 h", 3600.0),
        ("20s", 20.0),
        ("2 MIN", 120.0),
        ("1 d", 86400.0),
        ("500", 0.5),  # a bare number is milliseconds, as in Flink
        ("1.5 s", 1.5),
        (timedelta(seconds=3), 3.0),
        (250, 0.25),
    ],
)
def test_durations_in_flink_notation(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "seconds, text", [(10, "10 s"), (60, "1 min"), (3600, "1 h"), (0.5, "500 ms"), (90, "90 s")]
)
def test_durations_format_back_to_flink_notation(seconds, text):
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"restart-strategy.type": "fixed"},
            r"restart-strategy.type: unknown restart strategy 'fixed'.*use one of",
        ),
        ({"restart-strategy.type": "exponential"}, r"did you mean 'exponential-delay'"),
        ({"restart-strategy.type": 3}, r"unknown restart strategy 3"),
        (
            {"restart-strategy.type": "fixed-delay", FD + "attempts": -1},
            r"fixed-delay.attempts must be an integer ≥ 0, got -1; set it to an integer ≥ 0 \(default 1\)",
        ),
        (
            {"restart-strategy.type": "fixed-delay", FD + "attempts": "three"},
            r"attempts must be an integer ≥ 0, got 'three'",
        ),
        (
            {"restart-strategy.type": "fixed-delay", FD + "attempts": 1.5},
            r"attempts must be an integer ≥ 0, got 1.5",
        ),
        (
            {"restart-strategy.type": "fixed-delay", FD + "delay": "-5 s"},
            r"fixed-delay.delay must be a duration ≥ 0, got '-5 s'",
        ),
        (
            {"restart-strategy.type": "fixed-delay", FD + "delay": "10 parsecs"},
            r"unknown time unit 'parsecs'",
        ),
        (
            {"restart-strategy.type": "fixed-delay", FD + "delay": "soon"},
            r"cannot parse 'soon' as a duration.*\"10 s\"",
        ),
        (
            {"restart-strategy.type": "failure-rate", FR + "max-failures-per-interval": 0},
            r"max-failures-per-interval must be an integer ≥ 1, got 0",
        ),
        (
            {"restart-strategy.type": "failure-rate", FR + "failure-rate-interval": "0 s"},
            r"failure-rate-interval must be a duration ≥ 1 ms, got '0 s'",
        ),
        # Flink: checkArgument(backoffMultiplier > 1, ...); 1 would never grow the backoff.
        (
            {"restart-strategy.type": "exponential-delay", ED + "backoff-multiplier": 0.5},
            r"backoff-multiplier must be > 1, got 0.5; set it to > 1 \(default 1.5\)",
        ),
        (
            {"restart-strategy.type": "exponential-delay", ED + "backoff-multiplier": 1},
            r"backoff-multiplier must be > 1, got 1;",
        ),
        (
            {"restart-strategy.type": "exponential-delay", ED + "backoff-multiplier": "1.0"},
            r"backoff-multiplier must be > 1, got '1.0'",
        ),
        (
            {"restart-strategy.type": "exponential-delay", ED + "jitter-factor": 1.5},
            r"jitter-factor must be between 0 and 1, got 1.5",
        ),
        (
            {"restart-strategy.type": "exponential-delay", ED + "jitter-factor": -0.1},
            r"jitter-factor must be between 0 and 1, got -0.1",
        ),
        (
            {"restart-strategy.type": "exponential-delay", ED + "jitter-factor": "nan"},
            r"jitter-factor must be between 0 and 1, got 'nan'",
        ),
        (
            {"restart-strategy.type": "exponential-delay", ED + "initial-backoff": "0 s"},
            r"initial-backoff must be a duration ≥ 1 ms",
        ),
        (
            {"restart-strategy.type": "exponential-delay", ED + "attempts-before-reset-backoff": 0},
            r"attempts-before-reset-backoff must be an integer ≥ 1 \(or 'infinite'\), got 0",
        ),
        (
            {
                "restart-strategy.type": "exponential-delay",
                ED + "initial-backoff": "2 min",
                ED + "max-backoff": "1 min",
            },
            r"max-backoff must be ≥ restart-strategy.exponential-delay.initial-backoff.*'1 min' < .*'2 min'",
        ),
        (
            {"restart-strategy.fixed-delay.attempt": 3},
            r"unknown restart-strategy key 'restart-strategy.fixed-delay.attempt' \(value 3\)"
            r"; did you mean 'restart-strategy.fixed-delay.attempts'",
        ),
        (
            {"restart-strategy.fixed-delay.attempts": True, "restart-strategy.type": "fixed-delay"},
            r"got True",
        ),
    ],
)
def test_bad_values_name_the_key_the_value_and_the_fix(config, message):
    with pytest.raises(ValueError, match=message):
        load_restart_strategy(config)


def test_keys_of_other_strategies_and_other_sections_are_ignored():
    # Flink ignores options of strategies that are not selected; other sections are not ours.
    strategy = load_restart_strategy(
        {"restart-strategy.type": "fixed-delay", ED + "backoff-multiplier": "2", "core.parallelism": "4"}
    )
    assert repr(strategy) == "FixedDelay(attempts=1, delay=1 s)"


def test_infinite_attempts_spelled_out():
    strategy = load_restart_strategy(
        {"restart-strategy.type": "exponential-delay", ED + "attempts-before-reset-backoff": "infinite"}
    )
    assert strategy.attempts_before_reset_backoff == float("inf")


# -- The deprecated key 'restart-strategy' (Flink: restart-strategy.type .withDeprecatedKeys(...)) -----
def test_deprecated_type_key_is_honoured_with_a_warning_at_the_callers_line():
    from airflow_ft_provider.failover.restart_config import DeprecatedConfigKeyWarning

    with pytest.warns(
        DeprecatedConfigKeyWarning,
        match=(
            r"the key 'restart-strategy' is deprecated \(as in Flink\) and read as 'restart-strategy.type': "
            r"'fixeddelay'; rename it to 'restart-strategy.type'"
        ),
    ) as record:
        strategy = load_restart_strategy({"restart-strategy": "fixeddelay", FD + "attempts": 3})
    assert repr(strategy) == "FixedDelay(attempts=3, delay=1 s)"
    assert [w.filename for w in record] == [__file__]
    assert issubclass(
        DeprecatedConfigKeyWarning, FutureWarning
    )  # shown by default, unlike DeprecationWarning


def test_old_configs_no_longer_lose_their_restarts():
    """Issue 13: a config copied from an older Flink job used to get *no* restarts (the key was ignored)."""
    with pytest.warns(FutureWarning):
        strategy = load_restart_strategy({"restart-strategy": "exponential-delay", ED + "jitter-factor": 0})
    assert strategy.can_restart() and strategy.type_name == "exponential-delay"


def test_new_type_key_wins_over_the_deprecated_one():
    with pytest.warns(
        FutureWarning,
        match=(
            r"the deprecated key 'restart-strategy' is ignored because 'restart-strategy.type' is also set "
            r"\('none' wins over 'fixed-delay'\); remove 'restart-strategy'"
        ),
    ):
        strategy = load_restart_strategy({"restart-strategy": "fixed-delay", "restart-strategy.type": "none"})
    assert repr(strategy) == "NoRestart()"


def test_a_bad_value_under_the_deprecated_key_names_the_key_as_written():
    with (
        pytest.warns(FutureWarning),
        pytest.raises(
            ValueError,
            match=(
                r"^restart-strategy \(deprecated name of restart-strategy.type\)"
                r": unknown restart strategy 'fixd-delay'; "
                r"did you mean 'fixed-delay'\?"
            ),
        ),
    ):
        load_restart_strategy({"restart-strategy": "fixd-delay"})


def test_configs_without_the_deprecated_key_raise_no_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_restart_strategy({"restart-strategy.type": "fixed-delay"})
