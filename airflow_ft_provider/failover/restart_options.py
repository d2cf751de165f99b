"""Flink's restart-strategy configuration keys as data: names, aliases, defaults, what each accepts.

Keys, aliases and defaults are Flink's (``RestartStrategyOptions``); ``restart_config.py`` validates a
configuration against them and builds the strategy; the provider's configuration reference is generated
from ``OPTIONS``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

TYPE_KEY = "restart-strategy.type"
# Flink: RestartStrategyOptions.RESTART_STRATEGY =
#     key("restart-strategy.type").withDeprecatedKeys("restart-strategy")
DEPRECATED_TYPE_KEY = "restart-strategy"
KEY_PREFIX = "restart-strategy."

TYPE_ALIASES: dict[str, str] = {
    "none": "none",
    "off": "none",
    "disable": "none",
    "fixed-delay": "fixed-delay",
    "fixeddelay": "fixed-delay",
    "failure-rate": "failure-rate",
    "failurerate": "failure-rate",
    "exponential-delay": "exponential-delay",
    "exponentialdelay": "exponential-delay",
}


@dataclass(frozen=True)
class Option:
    key: str
    default: object
    kind: str  # "int", "float" or "duration"
    valid: Callable[[float], bool]
    requirement: str  # e.g. "≥ 1", shown as "<key> must be <requirement>"
    description: str


def _at_least(bound: float) -> Callable[[float], bool]:
    return lambda value: value >= bound


_FD, _FR, EXPONENTIAL_DELAY_PREFIX = (
    "restart-strategy.fixed-delay.",
    "restart-strategy.failure-rate.",
    "restart-strategy.exponential-delay.",
)
_POSITIVE_DURATION = "a duration ≥ 1 ms"

OPTIONS: dict[str, Option] = {
    option.key: option
    for option in (
        Option(
            _FD + "attempts",
            1,
            "int",
            _at_least(0),
            "an integer ≥ 0",
            "Failures tolerated before the run fails.",
        ),
        Option(
            _FD + "delay",
            "1 s",
            "duration",
            _at_least(0),
            "a duration ≥ 0",
            "Delay between a failure and the restart.",
        ),
        Option(
            _FR + "max-failures-per-interval",
            1,
            "int",
            _at_least(1),
            "an integer ≥ 1",
            "Failures tolerated inside one failure-rate-interval.",
        ),
        Option(
            _FR + "failure-rate-interval",
            "1 min",
            "duration",
            _at_least(0.001),
            _POSITIVE_DURATION,
            "Sliding window over which failures are counted.",
        ),
        Option(
            _FR + "delay",
            "1 s",
            "duration",
            _at_least(0),
            "a duration ≥ 0",
            "Delay between a failure and the restart.",
        ),
        Option(
            EXPONENTIAL_DELAY_PREFIX + "initial-backoff",
            "1 s",
            "duration",
            _at_least(0.001),
            _POSITIVE_DURATION,
            "Backoff of the first restart attempt.",
        ),
        Option(
            EXPONENTIAL_DELAY_PREFIX + "max-backoff",
            "1 min",
            "duration",
            _at_least(0.001),
            _POSITIVE_DURATION,
            "Upper bound of the backoff.",
        ),
        Option(
            EXPONENTIAL_DELAY_PREFIX + "backoff-multiplier",
            1.5,
            "float",
            lambda v: v > 1,
            "> 1",
            "Factor applied to the backoff after every attempt.",
        ),
        Option(
            EXPONENTIAL_DELAY_PREFIX + "reset-backoff-threshold",
            "1 h",
            "duration",
            _at_least(0.001),
            _POSITIVE_DURATION,
            "Failure-free time after the scheduled restart that resets backoff and attempt count.",
        ),
        Option(
            EXPONENTIAL_DELAY_PREFIX + "jitter-factor",
            0.1,
            "float",
            lambda v: 0 <= v <= 1,
            "between 0 and 1",
            "Random ± share of the backoff, so that runs do not restart in lockstep.",
        ),
        Option(
            EXPONENTIAL_DELAY_PREFIX + "attempts-before-reset-backoff",
            "infinite",
            "int",
            _at_least(1),
            "an integer ≥ 1 (or 'infinite')",
            "Restart attempts allowed before the run fails.",
        ),
    )
}
KNOWN_KEYS = (TYPE_KEY, *OPTIONS)
# Where a batch pipeline's defaults differ from Flink's. Flink's exponential-delay restarts for ever,
# which suits a streaming job that must come back; a batch pipeline must end. Ten attempts (about two
# minutes of backoff with the other defaults) ride out a flaky spell; a stage that fails on every try
# stops. Flink's behaviour is one key away: attempts-before-reset-backoff "infinite".
BATCH_PIPELINE_DEFAULTS: dict[str, object] = {EXPONENTIAL_DELAY_PREFIX + "attempts-before-reset-backoff": 10}
