"""Flink's own tests of its restart strategies, ported in spirit to this project's API.

Each test names the Flink test it comes from (apache/flink, flink-runtime/src/test/java/org/apache/
flink/runtime/executiongraph/failover/, Flink 1.19+ for the exponential-delay strategy). Flink counts
in milliseconds; so do these tests: ``ms(n)`` is n milliseconds in this project's seconds, and ``ManualClock``
starts at 0 like Flink's. Jitter is checked as Flink checks it: the set of values seen over 1000 draws.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from airflow_ft_provider.failover import (
    ExponentialDelayRestartStrategy,
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    ManualClock,
    NoRestartStrategy,
    load_restart_strategy,
)

ED = "restart-strategy.exponential-delay."
INT_MAX = 2**31 - 1  # Flink's Integer.MAX_VALUE, used as "never" for attempts and thresholds


def ms(n: float) -> float:
    return n / 1000


def backoff_ms(strategy) -> int:
    return round(strategy.backoff_seconds() * 1000)


def exponential(clock, initial, maximum, multiplier, reset, jitter, attempts=float("inf"), rng=None):
    """Flink's constructor order:
    (clock, initialBackoffMS, maxBackoffMS, multiplier, resetMS, jitter, attempts)."""
    return ExponentialDelayRestartStrategy(
        initial_backoff=ms(initial),
        max_backoff=ms(maximum),
        backoff_multiplier=multiplier,
        reset_backoff_threshold=ms(reset),
        jitter_factor=jitter,
        attempts_before_reset_backoff=attempts,
        clock=clock,
        rng=rng if rng is not None else random.Random(0),
    )


# ------------------------------------------------------------------------------------------------
# ExponentialDelayRestartBackoffTimeStrategyTest
# ------------------------------------------------------------------------------------------------
def test_max_attempts():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testMaxAttempts
    clock = ManualClock()
    strategy = exponential(clock, 1, 3, 1.2, 10, 0.25, attempts=13)
    for _ in range(13 + 1):
        assert strategy.can_restart()
        assert strategy.notify_failure() is True
        clock.advance(ms(3 + 1))
    assert not strategy.can_restart()


def test_backoff_before_any_failure_is_an_error():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testNotCallNotifyFailure
    strategy = exponential(ManualClock(), 42, 45, 2.0, 8, 0, attempts=10)
    with pytest.raises(
        RuntimeError, match=r"call notify_failure\(\) first \(Flink: 'Please call notifyFailure first.'\)"
    ):
        strategy.backoff_seconds()


def test_initial_backoff():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testInitialBackoff
    strategy = exponential(ManualClock(), 42, 45, 2.0, 8, 0)
    strategy.notify_failure()
    assert backoff_ms(strategy) == 42


def test_max_backoff():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testMaxBackoff (the clock stands still, so
    # the nine later failures merge into the first restart), then the same with the clock moving on.
    strategy = exponential(ManualClock(), 1, 6, 2.0, 8, 0.25)
    for _ in range(10):
        strategy.notify_failure()
        assert backoff_ms(strategy) <= 6
    clock = ManualClock()
    strategy = exponential(clock, 1, 6, 2.0, 8, 0.25)
    seen = []
    for _ in range(10):
        strategy.notify_failure()
        seen.append(backoff_ms(strategy))
        clock.advance(ms(7))
    assert max(seen) <= 6 and seen[-1] == 6


def test_reset_backoff():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testResetBackoff
    clock = ManualClock()
    strategy = exponential(clock, 1, 5, 2.0, 8, 0.25)
    assert strategy.notify_failure() is True
    clock.advance(ms(8 + backoff_ms(strategy) - 1))  # 1 ms short of the reset threshold
    assert strategy.notify_failure() is True
    assert backoff_ms(strategy) == 2  # increased
    clock.advance(ms(8 + backoff_ms(strategy)))  # exactly the threshold after the scheduled restart
    assert strategy.notify_failure() is True
    assert backoff_ms(strategy) == 1  # reset


def test_backoff_multiplier_truncates_to_whole_milliseconds():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testBackoffMultiplier
    # (long) (4 * 2.3) = 9, (long) (4 * 2.3 * 2.3) = (long) 21.16 = 21
    clock = ManualClock()
    strategy = exponential(clock, 4, 300, 2.3, INT_MAX, 0, attempts=10)
    delays = []
    for _ in range(3):
        assert strategy.notify_failure() is True
        delays.append(backoff_ms(strategy))
        clock.advance(ms(300 + 1))
    assert delays == [4, 9, 21]


def draws(make, advance, failures, rng_seed=7, rounds=1000):
    """Flink's assertCorrectRandomRangeWithFailureCount: the set of backoffs after `failures` failures,
    each `advance` ms after the previous one, over `rounds` fresh strategies sharing one clock."""
    clock, rng = ManualClock(), random.Random(rng_seed)
    seen = set()
    for _ in range(rounds):
        strategy = make(clock, rng)
        for _ in range(failures):
            clock.advance(ms(advance))
            assert strategy.notify_failure() is True
        seen.add(backoff_ms(strategy))
    return seen


def test_jitter_is_whole_milliseconds_drawn_on_the_uncapped_backoff():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testJitter
    #   failure 2: 4 ± (long) (4 · 0.25) = 4 ± 1          -> {3, 4, 5}
    #   failure 3: 8 ± 2 = 6..10, clamped to max 7        -> {6, 7}
    #   failure 4: 16 ± 4 = 12..20, all above max 7       -> {7}
    def make(clock, rng):
        return exponential(clock, 2, 7, 2.0, INT_MAX, 0.25, rng=rng)

    assert draws(make, 7 + 1, 2) == {3, 4, 5}
    assert draws(make, 7 + 1, 3) == {6, 7}
    assert draws(make, 7 + 1, 4) == {7}


def test_jitter_never_goes_above_max_nor_below_initial():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testJitterNoHigherThanMax (jitter-factor 1)
    def make(clock, rng):
        return exponential(clock, 1, 7, 2.0, INT_MAX, 1.0, rng=rng)

    assert draws(make, 7 + 1, 1) == {1, 2}  # 1 ± 1, clamped to ≥ 1
    assert draws(make, 7 + 1, 2) == {1, 2, 3, 4}  # 2 ± 2
    assert draws(make, 7 + 1, 3) == {1, 2, 3, 4, 5, 6, 7}  # 4 ± 4, clamped to [1, 7]


def test_multiple_settings():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testMultipleSettings
    clock = ManualClock()
    strategy = exponential(clock, 1, 9, 2.0, 80, 0.25)
    assert strategy.notify_failure() is True
    assert strategy.can_restart() and backoff_ms(strategy) == 1
    clock.advance(ms(80 + 1))  # reset after the first failure: still the initial backoff
    assert strategy.notify_failure() is True
    assert strategy.can_restart() and backoff_ms(strategy) == 1
    clock.advance(ms(4))  # grows until the threshold is reached
    assert strategy.notify_failure() is True
    assert strategy.can_restart() and backoff_ms(strategy) == 2
    clock.advance(ms(80 + 9 + 1))  # reset once the threshold is reached
    assert strategy.notify_failure() is True
    assert strategy.can_restart() and backoff_ms(strategy) == 1
    clock.advance(ms(9 + 1))  # and grows again
    assert strategy.notify_failure() is True
    assert strategy.can_restart() and backoff_ms(strategy) == 2


def assert_failures_merge(clock, strategy, expected_backoff):
    """Flink's checkMultipleExceptionsAreMerged: ten failures in every millisecond until the scheduled
    restart; only the very first starts an attempt, the restart time never moves."""
    new_attempt = True
    for elapsed in range(expected_backoff):
        for _ in range(10):
            assert strategy.notify_failure() is new_attempt
            new_attempt = False
            assert strategy.can_restart()
            assert backoff_ms(strategy) == expected_backoff - elapsed
        clock.advance(ms(1))


def test_merge_multiple_exceptions_into_one_attempt():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testMergeMultipleExceptionsIntoOneAttempt
    clock = ManualClock()
    strategy = exponential(clock, 2, 6, 2.0, 80, 0.0, attempts=3)
    assert_failures_merge(clock, strategy, 2)
    clock.advance(ms(1))  # past the restart: a new attempt
    assert_failures_merge(clock, strategy, 4)
    clock.advance(ms(1))
    assert_failures_merge(clock, strategy, 6)  # 8 capped at max 6
    clock.advance(ms(1))  # the 4th attempt exceeds attempts-before-reset-backoff 3
    assert strategy.notify_failure() is True
    assert not strategy.can_restart()


def test_merging_exceptions_works_with_resetting():
    # Flink: ExponentialDelayRestartBackoffTimeStrategyTest.testMergingExceptionsWorksWithResetting
    clock = ManualClock()
    strategy = exponential(clock, 2, 6, 2.0, 80, 0.0, attempts=3)
    for _ in range(10):
        assert_failures_merge(clock, strategy, 2)
        clock.advance(ms(1))
        assert_failures_merge(clock, strategy, 4)
        clock.advance(ms(1))
        assert_failures_merge(clock, strategy, 6)
        clock.advance(ms(80))  # quiet for the threshold: counting starts again


def test_defaults_wait_exactly_max_backoff_from_the_12th_attempt():
    """Issue 13: Flink jitters the uncapped backoff, then clamps. With the defaults (1 s, 1 min, 1.5,
    jitter 0.1), 1000 · 1.5^11 = 86497 ms ± 8649 stays above 60000: the 12th restart waits exactly
    1 min. Capping before jittering (the old order) waited 54-60 s."""
    for seed in range(200):
        clock = ManualClock()
        strategy = load_restart_strategy({}, clock=clock, rng=random.Random(seed), partitions_persisted=True)
        delays = []
        for _ in range(14):
            strategy.notify_failure()
            delays.append(backoff_ms(strategy))
            clock.advance(delays[-1] / 1000 + 1)
        assert delays[11:] == [60_000, 60_000, 60_000]
        assert 51_899 <= delays[10] <= 60_000  # 57665 ± 5766, clamped
        assert delays[0] in range(1000, 1101)  # 1000 ± 100, clamped to ≥ 1000


def test_jitter_offset_is_a_whole_number_of_milliseconds():
    """Flink draws nextLong(-offset, offset + 1) with offset = (long) (backoff · jitter): 5062 ms · 0.1
    gives ±506 ms, so every delay is a whole millisecond in [4556, 5568]."""
    config = {ED + "initial-backoff": "1 s", ED + "jitter-factor": "0.1"}  # attempt 5: (long) 5062.5
    seen = set()
    for seed in range(400):
        clock = ManualClock()
        strategy = load_restart_strategy(
            config, clock=clock, rng=random.Random(seed), partitions_persisted=True
        )
        for _ in range(5):
            strategy.notify_failure()
            delay = strategy.backoff_seconds()
            clock.advance(delay + 1)
        seen.add(delay)
    assert all(d * 1000 == round(d * 1000) for d in seen)
    assert min(seen) >= 4.556 and max(seen) <= 5.568
    assert min(seen) < 4.6 and max(seen) > 5.5  # both ends of the range are reached


def test_jitter_factor_zero_gives_truncated_exact_delays():
    # 1000 · 1.5^k truncated: 1000, 1500, 2250, 3375, 5062, 7593, 11390, 17085, 25628, 38443, 57665, 60000
    clock = ManualClock()
    strategy = load_restart_strategy({ED + "jitter-factor": 0}, clock=clock, partitions_persisted=True)
    delays = []
    for _ in range(12):
        strategy.notify_failure()
        delays.append(backoff_ms(strategy))
        clock.advance(delays[-1] / 1000 + 1)
    assert delays == [1000, 1500, 2250, 3375, 5062, 7593, 11390, 17085, 25628, 38443, 57665, 60000]


def test_huge_attempt_counts_saturate_like_java_and_still_clamp():
    # Math.pow overflows to Infinity, (long) Infinity is Long.MAX_VALUE: the backoff is max-backoff.
    clock = ManualClock(10)
    strategy = exponential(clock, 1000, 10_000, 1000.0, 3_600_000, 1.0, rng=random.Random(3))
    strategy.restore_state(replace(strategy.export_state(), attempt=100_000, restart_at=0.0))
    assert strategy.notify_failure() is True
    assert backoff_ms(strategy) == 10_000


def test_sub_millisecond_durations_truncate_like_duration_to_millis():
    # Flink's factories read every duration with Duration.toMillis(): 1500 µs is 1 ms.
    fixed = load_restart_strategy(
        {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "1500 us"}
    )
    assert fixed.backoff_seconds() == 0.001
    rate = load_restart_strategy(
        {"restart-strategy.type": "failure-rate", "restart-strategy.failure-rate.delay": "2.9 ms"}
    )
    assert rate.backoff_seconds() == 0.002


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"backoff_multiplier": 1.0}, r"backoff-multiplier must be > 1, got 1.0"),
        ({"initial_backoff": ms(0.5)}, r"initial-backoff must be at least 1 ms"),
        ({"max_backoff": ms(1)}, r"max-backoff must be ≥ initial-backoff"),
        ({"jitter_factor": 1.5}, r"jitter-factor must be between 0 and 1"),
        ({"attempts_before_reset_backoff": 0}, r"attempts-before-reset-backoff must be ≥ 1"),
    ],
)
def test_constructor_checks_flinks_arguments(kwargs, message):
    # Flink: the checkArgument calls of ExponentialDelayRestartBackoffTimeStrategy's constructor.
    arguments = {
        "initial_backoff": ms(2),
        "max_backoff": ms(10),
        "backoff_multiplier": 2.0,
        "reset_backoff_threshold": ms(8),
        "jitter_factor": 0.1,
        "attempts_before_reset_backoff": 5,
        "clock": ManualClock(),
        "rng": random.Random(),
    }
    with pytest.raises(ValueError, match=message):
        ExponentialDelayRestartStrategy(**{**arguments, **kwargs})


# ------------------------------------------------------------------------------------------------
# FailureRateRestartBackoffTimeStrategyTest
# ------------------------------------------------------------------------------------------------
def test_many_failures_within_rate():
    # Flink: FailureRateRestartBackoffTimeStrategyTest.testManyFailuresWithinRate
    clock = ManualClock()
    strategy = FailureRateRestartStrategy(max_failures_per_interval=1, interval=ms(1), delay=0, clock=clock)
    for _ in range(3):
        strategy.notify_failure()
        assert strategy.can_restart()
        clock.advance(ms(1 + 1))
    assert strategy.can_restart()


def test_failures_exceeding_rate():
    # Flink: FailureRateRestartBackoffTimeStrategyTest.testFailuresExceedingRate
    strategy = FailureRateRestartStrategy(
        max_failures_per_interval=3, interval=ms(10_000), delay=0, clock=ManualClock()
    )
    for _ in range(3):
        strategy.notify_failure()
        assert strategy.can_restart()
    strategy.notify_failure()
    assert not strategy.can_restart()


def test_failure_rate_interval_is_exclusive_in_whole_milliseconds():
    # Flink: canRestart() is now - earliest > failuresIntervalMS, on millisecond timestamps.
    clock = ManualClock()
    strategy = FailureRateRestartStrategy(max_failures_per_interval=1, interval=ms(10), delay=0, clock=clock)
    strategy.notify_failure()
    clock.advance(ms(10))
    strategy.notify_failure()
    assert not strategy.can_restart()  # exactly 10 ms apart: inside the interval
    clock.advance(ms(1))
    assert strategy.can_restart()  # 11 ms since the earliest kept failure


def test_failure_rate_backoff_time():
    # Flink: FailureRateRestartBackoffTimeStrategyTest.testBackoffTime (asked before any failure)
    strategy = FailureRateRestartStrategy(
        max_failures_per_interval=1, interval=ms(1), delay=ms(10_000), clock=ManualClock()
    )
    assert strategy.backoff_seconds() == 10.0


# ------------------------------------------------------------------------------------------------
# FixedDelayRestartBackoffTimeStrategyTest
# ------------------------------------------------------------------------------------------------
def test_number_of_restarts():
    # Flink: FixedDelayRestartBackoffTimeStrategyTest.testNumberOfRestarts
    strategy = FixedDelayRestartStrategy(attempts=3, delay=0)
    for _ in range(3):
        strategy.notify_failure()
        # twice: can_restart() must not be what keeps the count
        assert strategy.can_restart()
        assert strategy.can_restart()
    strategy.notify_failure()
    assert not strategy.can_restart()


def test_fixed_delay_backoff_time():
    # Flink: FixedDelayRestartBackoffTimeStrategyTest.testBackoffTime (asked before any failure)
    assert FixedDelayRestartStrategy(attempts=1, delay=ms(10_000)).backoff_seconds() == 10.0


# ------------------------------------------------------------------------------------------------
# RestartBackoffTimeStrategyFactoryLoaderTest (Flink 1.19+): the job's configuration (a pipeline's
# restart_strategy=) overrides the cluster's ([ft_provider] of airflow.cfg); nothing set means
# exponential-delay with Flink's defaults when partitions are persisted (checkpointing), else none.
# ------------------------------------------------------------------------------------------------
TYPES = {
    "none": NoRestartStrategy,
    "fixed-delay": FixedDelayRestartStrategy,
    "failure-rate": FailureRateRestartStrategy,
    "exponential-delay": ExponentialDelayRestartStrategy,
}


@pytest.mark.parametrize(
    "job, cluster, expected",
    [
        # testNoRestartStrategySpecifiedInJobConfig, testFixedDelayStrategySpecifiedInJobConfig,
        # testExponentialDelayStrategySpecifiedInJobConfig, testFailureRateStrategySpecifiedInJobConfig
        ("none", "fixed-delay", "none"),
        ("fixed-delay", "exponential-delay", "fixed-delay"),
        ("exponential-delay", "failure-rate", "exponential-delay"),
        ("failure-rate", "fixed-delay", "failure-rate"),
        # test...StrategySpecifiedInClusterConfig
        (None, "none", "none"),
        (None, "fixed-delay", "fixed-delay"),
        (None, "exponential-delay", "exponential-delay"),
        (None, "failure-rate", "failure-rate"),
    ],
)
def test_job_configuration_overrides_cluster_configuration(job, cluster, expected):
    cluster_config = {"restart-strategy.type": cluster}
    job_config = {} if job is None else {"restart-strategy.type": job}
    strategy = load_restart_strategy({**cluster_config, **job_config}, partitions_persisted=True)
    assert type(strategy) is TYPES[expected]


@pytest.mark.parametrize("layer", ["job", "cluster"])
def test_invalid_strategy_is_an_error(layer):
    # Flink: testInvalidStrategySpecifiedInJobConfig, testInvalidStrategySpecifiedInClusterConfig
    config = {"restart-strategy.type": "invalid-strategy"}
    layers = {"job": ({}, config), "cluster": (config, {})}[layer]
    with pytest.raises(ValueError, match=r"unknown restart strategy 'invalid-strategy'"):
        load_restart_strategy({**layers[0], **layers[1]})


def test_no_strategy_when_checkpointing_enabled_is_exponential_delay_with_flinks_defaults():
    # Flink: testNoStrategySpecifiedWhenCheckpointingEnabled (persisted partitions play checkpoints)
    strategy = load_restart_strategy({}, partitions_persisted=True)
    assert type(strategy) is ExponentialDelayRestartStrategy
    assert (strategy.initial_backoff, strategy.max_backoff, strategy.backoff_multiplier) == (1.0, 60.0, 1.5)
    assert (strategy.reset_backoff_threshold, strategy.jitter_factor) == (3600.0, 0.1)
    assert strategy.attempts_before_reset_backoff == float("inf")


def test_no_strategy_when_checkpointing_disabled_is_no_restart():
    # Flink: testNoStrategySpecifiedWhenCheckpointingDisabled
    assert type(load_restart_strategy({}, partitions_persisted=False)) is NoRestartStrategy
