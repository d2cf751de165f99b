"""The sentences people read about recovery: a decision stays readable for a region of hundreds of
tasks, and a restart budget counts down in plain words."""

import random

from airflow_ft_provider.failover.clock import ManualClock
from airflow_ft_provider.failover.decision import FailoverDecision, TryKey
from airflow_ft_provider.failover.restart_config import load_restart_strategy
from airflow_ft_provider.failover.restart_strategies import (
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
)
from airflow_ft_provider.recovery.wording import (
    decision_reason,
    describe_backoff,
    remaining_budget,
    task_names,
)

ED = "restart-strategy.exponential-delay."
EXPONENTIAL = {"restart-strategy.type": "exponential-delay"}  # attempts-before-reset-backoff: infinite
SEED_000 = {
    **EXPONENTIAL,
    ED + "backoff-multiplier": "2",
    ED + "max-backoff": "10 s",
    ED + "jitter-factor": "0",
}


def restart_after_failure(strategy, clock):
    """A failure one second after the scheduled restart; returns its backoff in seconds."""
    strategy.notify_failure()
    backoff = strategy.backoff_seconds()
    clock.advance(backoff + 1)
    return backoff


def test_a_big_region_is_named_by_its_first_tasks_and_its_size():
    region = frozenset(f"s{i:03d}" for i in range(300))
    decision = FailoverDecision.restartable(
        TryKey("s299", 1),
        cause="RuntimeError: boom",
        decided_at=0.0,
        regions=(region,),
        delay=1.0,
        unavailable=(),
        new_attempt=True,
        strategy="FixedDelay",
        scope="run",
    )
    reason = decision_reason(decision)
    assert "[s000, s001," in reason and "s019, … (300 in all)]" in reason and "s020" not in reason
    assert len(reason) < 400
    assert task_names(["b", "a"]) == "a, b"  # small sets are named whole, sorted


def test_remaining_budget_counts_down_in_plain_words():
    clock = ManualClock(1000.0)
    fixed = FixedDelayRestartStrategy(attempts=3, delay=10)
    assert remaining_budget(fixed) == "3 of 3 restarts left (0 failures so far)"
    fixed.notify_failure()
    fixed.notify_failure()
    assert remaining_budget(fixed) == "1 of 3 restarts left (2 failures so far)"
    fixed.notify_failure()
    fixed.notify_failure()
    assert remaining_budget(fixed).startswith("0 of 3 restarts left")

    rate = FailureRateRestartStrategy(max_failures_per_interval=2, interval=60, delay=1, clock=clock)
    rate.notify_failure()
    assert remaining_budget(rate).startswith("1 more failures allowed within 1 min")
    clock.advance(61)  # the first failure leaves the interval
    assert remaining_budget(rate).startswith("2 more failures allowed")

    expo = load_restart_strategy({**EXPONENTIAL, ED + "attempts-before-reset-backoff": "4"}, clock=clock)
    expo.notify_failure()
    assert remaining_budget(expo).startswith("3 of 4 restarts left")
    unlimited = load_restart_strategy(EXPONENTIAL, clock=clock)
    assert remaining_budget(unlimited).startswith("unlimited restarts; 0 so far")
    assert remaining_budget(NoRestartStrategy()).startswith("no restarts")


def test_each_strategy_explains_the_backoff_it_made():
    clock = ManualClock()
    jittered = load_restart_strategy(
        {**SEED_000, ED + "jitter-factor": "0.1"}, clock=clock, rng=random.Random(3)
    )
    delays = [restart_after_failure(jittered, clock) for _ in range(3)]
    jitter = round(delays[2] * 1000) - 4000  # around the 4 s backoff of attempt 3
    sign = "+" if jitter >= 0 else "−"
    assert (
        describe_backoff(jittered.last_backoff())
        == f"exponential-delay, attempt 3: 4 s {sign} jitter {abs(jitter)} ms"
    )
    capped = load_restart_strategy(SEED_000, clock=clock)
    for _ in range(5):
        restart_after_failure(capped, clock)
    assert (
        describe_backoff(capped.last_backoff())
        == "exponential-delay, attempt 5: 16 s, held to max-backoff 10 s"
    )
    fixed = FixedDelayRestartStrategy(attempts=3, delay=2)
    fixed.notify_failure()
    assert describe_backoff(fixed.last_backoff()) == "fixed-delay, restart 1 of 3: 2 s"
    rate = load_restart_strategy(
        {"restart-strategy.type": "failure-rate", "restart-strategy.failure-rate.delay": "5 s"}, clock=clock
    )
    rate.notify_failure()
    assert describe_backoff(rate.last_backoff()) == "failure-rate: 5 s"
    assert describe_backoff(NoRestartStrategy().last_backoff()) == "none: no restart"
