"""Turns Flink's restart-strategy configuration keys into a restart strategy, validating every value.

Keys, aliases and defaults are Flink's (docs/configuration.md has the reference). Every problem is a
ValueError naming the key, the value and the fix, raised when the configuration is loaded (that is,
when the DAG is parsed), never in the middle of a run.
"""

from __future__ import annotations

import difflib
import math
import os
import random
import sys
import warnings
from collections.abc import Callable, Mapping
from functools import partial

from .clock import Clock, SystemClock
from .durations import parse_duration, whole_millis
from .exponential_delay import ExponentialDelayRestartStrategy
from .key_hint import unknown_key_hint
from .restart_options import (
    DEPRECATED_TYPE_KEY,
    EXPONENTIAL_DELAY_PREFIX,
    KEY_PREFIX,
    KNOWN_KEYS,
    OPTIONS,
    TYPE_ALIASES,
    TYPE_KEY,
    Option,
)
from .restart_strategies import (
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
    RestartStrategy,
)


def _fail(key: str, raw: object, requirement: str, detail: str = "") -> ValueError:
    option = OPTIONS.get(key)
    default = f" (default {option.default!r})" if option else ""
    extra = f": {detail}" if detail else ""
    return ValueError(f"{key} must be {requirement}, got {raw!r}{extra}; set it to {requirement}{default}")


def _convert(option: Option, raw: object) -> float:
    if option.kind == "duration":
        try:
            # Whole milliseconds, as Flink's strategies get them (Duration.toMillis truncates).
            return whole_millis(parse_duration(raw)) / 1000
        except ValueError as err:
            raise _fail(option.key, raw, option.requirement, str(err)) from None
    text = raw.strip().lower() if isinstance(raw, str) else raw
    if option.kind == "int" and text in ("infinite", "inf") and option.default == "infinite":
        return math.inf
    try:
        if isinstance(text, bool):
            raise ValueError
        value = float(text) if option.kind == "float" else int(text)  # type: ignore[arg-type,call-overload]
        if option.kind == "int" and isinstance(text, float) and not text.is_integer():
            raise ValueError
    except (TypeError, ValueError):
        raise _fail(option.key, raw, option.requirement) from None
    if not math.isfinite(value):
        raise _fail(option.key, raw, option.requirement)
    return value


def _value(config: Mapping[str, object], key: str) -> float:
    option = OPTIONS[key]
    raw = config.get(key, option.default)
    value = _convert(option, raw)
    if not option.valid(value):
        raise _fail(key, raw, option.requirement)
    return value


def _check_keys(config: Mapping[str, object]) -> None:
    for key in config:
        if isinstance(key, str) and key.startswith(KEY_PREFIX) and key not in KNOWN_KEYS:
            hint = unknown_key_hint(key, KNOWN_KEYS)
            raise ValueError(f"unknown restart-strategy key {key!r} (value {config[key]!r}); {hint}")


class DeprecatedConfigKeyWarning(FutureWarning):
    """A deprecated Flink key that is still honoured under its new name.

    A FutureWarning, not a DeprecationWarning: Python (and so Airflow's DAG processor, which records
    the warnings of a DAG file's import) ignores DeprecationWarnings raised outside ``__main__``, and
    this one is meant for the DAG author, not for a Python developer.
    """


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _outside_caller() -> int:
    """The ``stacklevel`` of the first frame outside this package: the DAG file's line."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


def resolve_deprecated_keys(config: Mapping[str, object], *, source: str = "") -> dict[str, object]:
    """A copy of ``config`` with the deprecated ``restart-strategy`` read as ``restart-strategy.type``.

    Flink keeps the old key as a deprecated alias of the new one; the new key wins when both are set.
    Without this, a configuration copied from an older Flink job would silently get no restarts.
    ``source`` (e.g. "[ft_provider] of airflow.cfg") says where the configuration was written.
    """
    resolved = dict(config)
    if DEPRECATED_TYPE_KEY not in resolved:
        return resolved
    old = resolved.pop(DEPRECATED_TYPE_KEY)
    where = f" in {source}" if source else ""
    if TYPE_KEY in resolved:
        message = (
            f"the deprecated key {DEPRECATED_TYPE_KEY!r}{where} is ignored because {TYPE_KEY!r} is also set "
            f"({resolved[TYPE_KEY]!r} wins over {old!r}); remove {DEPRECATED_TYPE_KEY!r}"
        )
    else:
        resolved[TYPE_KEY] = old
        message = (
            f"the key {DEPRECATED_TYPE_KEY!r}{where} is deprecated (as in Flink) and read as {TYPE_KEY!r}: "
            f"{old!r}; rename it to {TYPE_KEY!r}"
        )
    warnings.warn(message, DeprecatedConfigKeyWarning, stacklevel=_outside_caller())
    return resolved


def _type(config: Mapping[str, object], partitions_persisted: bool, key: str = TYPE_KEY) -> str:
    _check_keys(config)
    raw = config.get(TYPE_KEY)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return "exponential-delay" if partitions_persisted else "none"
    name = raw.strip().lower() if isinstance(raw, str) else raw
    if name not in TYPE_ALIASES:
        choices = (
            "none (aliases off, disable), fixed-delay (fixeddelay), failure-rate (failurerate), "
            "exponential-delay (exponentialdelay)"
        )
        close = difflib.get_close_matches(str(name), TYPE_ALIASES, n=1)
        hint = f"did you mean {TYPE_ALIASES[close[0]]!r}? " if close else ""
        raise ValueError(f"{key}: unknown restart strategy {raw!r}; {hint}use one of: {choices}")
    return TYPE_ALIASES[name]


def restart_strategy_type(config: Mapping[str, object], *, partitions_persisted: bool = False) -> str:
    """The canonical type named by the config; unset means exponential-delay when partitions are
    persisted and none otherwise (Flink's rule, with persisted partitions in place of checkpoints)."""
    return _type(resolve_deprecated_keys(config), partitions_persisted, _type_key_label(config))


def _type_key_label(config: Mapping[str, object]) -> str:
    """The key a bad type value came from, as the user wrote it."""
    if DEPRECATED_TYPE_KEY in config and TYPE_KEY not in config:
        return f"{DEPRECATED_TYPE_KEY} (deprecated name of {TYPE_KEY})"
    return TYPE_KEY


def load_restart_strategy(
    config: Mapping[str, object],
    *,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    partitions_persisted: bool = False,
) -> RestartStrategy:
    """Build the restart strategy described by Flink-style ``config`` keys (others are ignored)."""
    return restart_strategy_factory(config, clock=clock, rng=rng, partitions_persisted=partitions_persisted)()


def restart_strategy_factory(
    config: Mapping[str, object],
    *,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    partitions_persisted: bool = False,
) -> Callable[[], RestartStrategy]:
    """The configuration read and validated once; the function returned builds a strategy with a fresh
    budget each time (a decision restores its scope's budget into one)."""
    label = _type_key_label(config)
    config = resolve_deprecated_keys(config)
    kind = _type(config, partitions_persisted, label)
    clock = clock if clock is not None else SystemClock()
    if kind == "none":
        return NoRestartStrategy
    if kind == "fixed-delay":
        return partial(
            FixedDelayRestartStrategy,
            attempts=int(_value(config, "restart-strategy.fixed-delay.attempts")),
            delay=_value(config, "restart-strategy.fixed-delay.delay"),
        )
    if kind == "failure-rate":
        return partial(
            FailureRateRestartStrategy,
            max_failures_per_interval=int(
                _value(config, "restart-strategy.failure-rate.max-failures-per-interval")
            ),
            interval=_value(config, "restart-strategy.failure-rate.failure-rate-interval"),
            delay=_value(config, "restart-strategy.failure-rate.delay"),
            clock=clock,
        )
    prefix = EXPONENTIAL_DELAY_PREFIX
    initial = _value(config, prefix + "initial-backoff")
    maximum = _value(config, prefix + "max-backoff")
    if maximum < initial:
        raise ValueError(
            f"{prefix}max-backoff must be ≥ {prefix}initial-backoff, got max-backoff "
            f"{config.get(prefix + 'max-backoff', '1 min')!r} < initial-backoff "
            f"{config.get(prefix + 'initial-backoff', '1 s')!r}; raise max-backoff or lower initial-backoff"
        )
    return partial(
        ExponentialDelayRestartStrategy,
        initial_backoff=initial,
        max_backoff=maximum,
        backoff_multiplier=_value(config, prefix + "backoff-multiplier"),
        reset_backoff_threshold=_value(config, prefix + "reset-backoff-threshold"),
        jitter_factor=_value(config, prefix + "jitter-factor"),
        attempts_before_reset_backoff=_value(config, prefix + "attempts-before-reset-backoff"),
        clock=clock,
        rng=rng if rng is not None else random.Random(),
    )
