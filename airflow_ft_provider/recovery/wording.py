"""The words people read about recovery: task logs, the failover page, ``airflow-ft history``.

Rendered here, outside the core, from its typed decisions; causes are masked before they are stored
(the journal is in S3, the page is not covered by Airflow's log masking).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timezone

from airflow_ft_provider.failover.backoff import Backoff, ExponentialBackoff, FixedBackoff, RateBackoff
from airflow_ft_provider.failover.decision import FailoverDecision, Outcome
from airflow_ft_provider.failover.durations import format_duration, representable
from airflow_ft_provider.failover.exponential_delay import ExponentialDelayRestartStrategy
from airflow_ft_provider.failover.restart_strategies import (
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    RestartStrategy,
)
from airflow_ft_provider.failover.strategy_state import ExponentialDelayState, FixedDelayState

KILLED_CAUSE = (
    "the previous try ended without a recorded failure: its process was killed "
    "(SIGKILL, OOM or a lost worker)"
)


def mask_secrets(text: str) -> str:
    """``text`` with every secret Airflow's secrets masker knows replaced by ``***``: the connections this
    process has read (the task SDK's masker, and the core one where the API server has read them)."""
    from airflow_ft_provider._compat import redact_secrets

    return redact_secrets(text)


def describe_exception(exc: BaseException) -> str:
    """``Type: first line of the message``, secrets masked (before cutting, so no part of one survives)."""
    message = mask_secrets(str(exc)).strip()
    text = message.splitlines()[0] if message else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


def describe_cause(cause: BaseException | str) -> str:
    return mask_secrets(cause) if isinstance(cause, str) else describe_exception(cause)


NAMES_SHOWN = 20  # a sentence names this many tasks at most; the journal's event lists them all


def task_names(names: Iterable[str], limit: int = NAMES_SHOWN) -> str:
    """``a, b, c`` sorted; past ``limit`` names, the first ones and how many there are in all."""
    listed = sorted(names)
    shown = ", ".join(listed[:limit])
    return shown if len(listed) <= limit else f"{shown}, … ({len(listed)} in all)"


def next_try(decision: FailoverDecision) -> str:
    """``next try not before 14:02:07 UTC: exponential-delay, attempt 3: 4 s + jitter 300 ms``."""
    moment = datetime.fromtimestamp(representable(decision.restart_at), tz=timezone.utc)
    at = moment.strftime("%H:%M:%S" if decision.delay < 86_400 else "%Y-%m-%d %H:%M:%S")
    backoff = decision.plan.backoff if decision.plan else ""
    return f"next try not before {at} UTC" + (f": {backoff}" if backoff else "")


def decision_reason(decision: FailoverDecision) -> str:
    """One sentence: what failed, what restarts when and why, or why nothing does."""
    if decision.superseded:
        return (
            f"{decision.failed_task} try {decision.try_number} was stopped by a failover restart; "
            "not counted as a failure"
        )
    labels = f" [{decision.labels.describe()}]" if decision.labels else ""
    if decision.outcome is Outcome.NOT_RECOVERABLE and decision.labels is not None:
        return (
            f"{decision.failed_task} try {decision.try_number} failed ({decision.cause}){labels}: not "
            f"recoverable, {decision.labels.reason}; not restarted (no restart counted). Fix the cause, "
            "then clear the task or restart its region from the failover page"
        )
    if not decision.restart:
        return f"Recovery is suppressed by {decision.strategy}"
    what = "; ".join(f"[{task_names(r)}]" for r in decision.regions[:NAMES_SHOWN])
    what += f"; … ({len(decision.regions)} regions)" if len(decision.regions) > NAMES_SHOWN else ""
    lost = f"; unavailable partitions: {', '.join(decision.unavailable)}" if decision.unavailable else ""
    merged = "" if decision.new_attempt else " (merged into the restart already scheduled)"
    merged += f" ({next_try(decision)})" if decision.plan and decision.plan.backoff else ""
    return (
        f"{decision.failed_task} failed ({decision.cause}){labels}; restarting {len(decision.regions)} "
        f"region(s) {what} after {format_duration(decision.delay)}{merged}{lost}; "
        f"strategy {decision.strategy}"
    )


def pending_clears_reason(key: object) -> str:
    return f"the restart decided for {key} is clearing its tasks, this one or its producers"


API_UNREACHABLE_REASON = "the Airflow REST API is unreachable: a restart of this run must be finished first"


def restarts_after(task: str, producers: set[str]) -> str:
    return f"{task} restarts after {task_names(producers)}"


def remaining_budget(strategy: RestartStrategy) -> str:
    """How many more failures a restart follows, in plain words (the failover page's budget)."""
    state = strategy.export_state()
    match strategy:
        case FixedDelayRestartStrategy() if isinstance(state, FixedDelayState):
            left = max(0, strategy.attempts - state.failures)
            return f"{left} of {strategy.attempts} restarts left ({state.failures} failures so far)"
        case FailureRateRestartStrategy():
            recent, most = strategy.recent_failures(), strategy.max_failures_per_interval
            interval = format_duration(strategy.interval)
            left = max(0, most - recent)
            return (
                f"{left} more failures allowed within {interval} ({recent} of {most} in the last {interval})"
            )
        case ExponentialDelayRestartStrategy() if isinstance(state, ExponentialDelayState):
            quiet = format_duration(strategy.reset_backoff_threshold)
            if math.isinf(strategy.attempts_before_reset_backoff):
                return (
                    f"unlimited restarts; {state.attempt} so far, the backoff resets after {quiet} "
                    "without failure"
                )
            most = int(strategy.attempts_before_reset_backoff)
            left = max(0, most - state.attempt)
            return f"{left} of {most} restarts left; the count resets after {quiet} without failure"
        case _:
            return "no restarts: the first failure fails the run"


def describe_backoff(backoff: Backoff) -> str:
    """How a backoff was made: ``exponential-delay, attempt 3: 4 s + jitter 300 ms``."""
    match backoff:
        case FixedBackoff():
            delay = format_duration(backoff.delay)
            return f"fixed-delay, restart {backoff.restart} of {backoff.attempts}: {delay}"
        case RateBackoff():
            return f"failure-rate: {format_duration(backoff.delay)}"
        case ExponentialBackoff():
            text = f"exponential-delay, attempt {backoff.attempt}: {format_duration(backoff.drawn_ms / 1000)}"
            if backoff.jittered:
                sign = "+" if backoff.jitter_ms >= 0 else "−"
                text += f" {sign} jitter {format_duration(abs(backoff.jitter_ms) / 1000)}"
            if backoff.held_to is not None:
                text += f", held to {backoff.held_to} {format_duration(backoff.backoff_ms / 1000)}"
            return text
        case _:
            return "none: no restart"
