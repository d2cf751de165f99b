"""Whether and when to restart: Flink's restart strategies, driven by a manual clock."""

import json
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
from airflow_ft_provider.failover.strategy_state import state_from_json, state_to_json

ED = "restart-strategy.exponential-delay."

SEED_000_EXAMPLE = {
    "restart-strategy.type": "exponential-delay",
    ED + "initial-backoff": "1 s",
    ED + "backoff-multiplier": "2",
    ED + "max-backoff": "10 s",
    ED + "jitter-factor": "0",
}


def fail_after_restart(strategy, clock, pause=1.0):
    """A failure that happens `pause` seconds after the scheduled restart; returns the new backoff."""
    assert strategy.notify_failure() is True
    backoff = strategy.backoff_seconds()
    clock.advance(backoff + pause)
    return backoff


def test_seed_000_worked_example_without_jitter():
    clock = ManualClock()
    strategy = load_restart_strategy(SEED_000_EXAMPLE, clock=clock)
    delays = [fail_after_restart(strategy, clock) for _ in range(7)]
    assert delays == [1, 2, 4, 8, 10, 10, 10]
    assert strategy.can_restart()


def test_seed_000_jitter_keeps_third_retry_between_3_6_and_4_4_seconds():
    config = {**SEED_000_EXAMPLE, ED + "jitter-factor": "0.1"}
    third_delays = []
    for seed in range(500):
        clock = ManualClock()
        strategy = load_restart_strategy(config, clock=clock, rng=random.Random(seed))
        third_delays.append([fail_after_restart(strategy, clock) for _ in range(3)][2])
    assert all(3.6 <= d <= 4.4 for d in third_delays)
    # the jitter really spreads restarts: both halves of the range are used
    assert min(third_delays) < 3.8 and max(third_delays) > 4.2


def test_jitter_is_clamped_to_initial_and_max_backoff():
    config = {**SEED_000_EXAMPLE, ED + "jitter-factor": "0.5"}
    for seed in range(200):
        clock = ManualClock()
        strategy = load_restart_strategy(config, clock=clock, rng=random.Random(seed))
        delays = [fail_after_restart(strategy, clock) for _ in range(8)]
        assert 1.0 <= delays[0] <= 1.5  # never below initial-backoff
        assert all(d <= 10.0 for d in delays)  # never above max-backoff
        assert all(5.0 <= d <= 10.0 for d in delays[4:])


def test_seed_000_attempts_before_reset_backoff_8_fails_on_the_9th_attempt():
    config = {**SEED_000_EXAMPLE, ED + "attempts-before-reset-backoff": "8"}
    clock = ManualClock()
    strategy = load_restart_strategy(config, clock=clock)
    allowed = []
    for _ in range(9):
        fail_after_restart(strategy, clock)
        allowed.append(strategy.can_restart())
    assert allowed == [True] * 8 + [False]


def test_seed_000_reset_after_6_min_without_failure():
    config = {
        **SEED_000_EXAMPLE,
        ED + "reset-backoff-threshold": "6 min",
        ED + "attempts-before-reset-backoff": 8,
    }
    clock = ManualClock()
    strategy = load_restart_strategy(config, clock=clock)
    assert [fail_after_restart(strategy, clock) for _ in range(4)] == [1, 2, 4, 8]
    # The 4th restart was scheduled 8 s after the 4th failure; fail 6 min after that restart.
    clock.advance(6 * 60 - 1)  # fail_after_restart already advanced 1 s past the restart
    assert strategy.notify_failure() is True
    assert strategy.backoff_seconds() == 1.0
    assert strategy.attempt == 1


def test_failure_just_before_reset_threshold_keeps_growing():
    config = {**SEED_000_EXAMPLE, ED + "reset-backoff-threshold": "6 min"}
    clock = ManualClock()
    strategy = load_restart_strategy(config, clock=clock)
    assert [fail_after_restart(strategy, clock) for _ in range(3)] == [1, 2, 4]
    clock.advance(6 * 60 - 2)  # 1 s short of the threshold
    strategy.notify_failure()
    assert strategy.backoff_seconds() == 8.0


def test_failures_at_or_before_the_scheduled_restart_merge_into_one_attempt():
    clock = ManualClock()
    strategy = load_restart_strategy(SEED_000_EXAMPLE, clock=clock)
    assert strategy.notify_failure() is True  # attempt 1, restart scheduled at t=1
    clock.advance(0.4)
    assert strategy.notify_failure() is False  # another region failing in the same incident
    assert strategy.backoff_seconds() == pytest.approx(0.6)  # the restart time does not move
    clock.advance(0.6)
    assert strategy.notify_failure() is False  # exactly at the scheduled restart: still merged
    assert strategy.attempt == 1
    clock.advance(0.001)
    assert strategy.notify_failure() is True
    assert strategy.attempt == 2
    assert strategy.backoff_seconds() == 2.0


def test_huge_attempt_counts_do_not_overflow():
    config = {**SEED_000_EXAMPLE, ED + "backoff-multiplier": "1000"}
    clock = ManualClock()
    strategy = load_restart_strategy(config, clock=clock)
    strategy.restore_state(replace(strategy.export_state(), attempt=10_000, restart_at=0.0, failed_at=0.0))
    clock.advance(1)
    strategy.notify_failure()
    assert strategy.backoff_seconds() == 10.0


def test_fixed_delay_counts_failures():
    strategy = load_restart_strategy(
        {
            "restart-strategy.type": "fixeddelay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "10 s",
        }
    )
    assert isinstance(strategy, FixedDelayRestartStrategy)
    allowed = []
    for _ in range(4):
        strategy.notify_failure()
        allowed.append(strategy.can_restart())
        assert strategy.backoff_seconds() == 10.0
    assert allowed == [True, True, True, False]
    assert repr(strategy) == "FixedDelay(attempts=3, delay=10 s)"


def test_fixed_delay_defaults_are_flinks():
    strategy = load_restart_strategy({"restart-strategy.type": "fixed-delay"})
    assert (strategy.attempts, strategy.delay) == (1, 1.0)


def test_failure_rate_refuses_the_max_plus_first_failure_inside_the_interval():
    clock = ManualClock()
    strategy = load_restart_strategy(
        {
            "restart-strategy.type": "failure-rate",
            "restart-strategy.failure-rate.max-failures-per-interval": "3",
            "restart-strategy.failure-rate.failure-rate-interval": "5 min",
            "restart-strategy.failure-rate.delay": "10 s",
        },
        clock=clock,
    )
    assert isinstance(strategy, FailureRateRestartStrategy)
    allowed = []
    for _ in range(4):  # four failures one minute apart: all inside one 5-minute window
        strategy.notify_failure()
        allowed.append(strategy.can_restart())
        clock.advance(60)
    assert allowed == [True, True, True, False]
    assert strategy.backoff_seconds() == 10.0


def test_failure_rate_window_slides():
    clock = ManualClock()
    strategy = load_restart_strategy(
        {
            "restart-strategy.type": "failurerate",
            "restart-strategy.failure-rate.max-failures-per-interval": 2,
            "restart-strategy.failure-rate.failure-rate-interval": "1 min",
        },
        clock=clock,
    )
    for gap in (0, 31, 31, 31, 31):  # never 3 failures within 60 s
        clock.advance(gap)
        strategy.notify_failure()
        assert strategy.can_restart()
    clock.advance(10)  # 3 failures within 41 s
    strategy.notify_failure()
    assert not strategy.can_restart()


@pytest.mark.parametrize("alias", ["none", "off", "disable", "NONE", " Off "])
def test_none_aliases_never_restart(alias):
    strategy = load_restart_strategy({"restart-strategy.type": alias})
    assert isinstance(strategy, NoRestartStrategy)
    strategy.notify_failure()
    assert not strategy.can_restart()


def test_unset_type_defaults_on_whether_partitions_are_persisted():
    assert isinstance(load_restart_strategy({}), NoRestartStrategy)
    strategy = load_restart_strategy({}, partitions_persisted=True)
    assert isinstance(strategy, ExponentialDelayRestartStrategy)
    assert (strategy.initial_backoff, strategy.max_backoff, strategy.backoff_multiplier) == (1.0, 60.0, 1.5)
    assert (strategy.reset_backoff_threshold, strategy.jitter_factor) == (3600.0, 0.1)
    assert strategy.attempts_before_reset_backoff == float("inf")


@pytest.mark.parametrize(
    "config",
    [
        {"restart-strategy.type": "none"},
        {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 2},
        {
            "restart-strategy.type": "failure-rate",
            "restart-strategy.failure-rate.max-failures-per-interval": 2,
        },
        {**SEED_000_EXAMPLE, ED + "jitter-factor": "0.3"},
    ],
)
def test_state_round_trips_through_json_between_processes(config):
    """Two 'workers' alternate, each loading the run's state, recording a failure and saving it."""
    clock = ManualClock(1_000_000)
    reference = load_restart_strategy(config, clock=clock, rng=random.Random(7))
    stored = json.dumps(state_to_json(load_restart_strategy(config, clock=clock).export_state()))
    for _ in range(5):
        worker = load_restart_strategy(config, clock=clock, rng=random.Random(7))
        worker.restore_state(state_from_json(json.loads(stored)))
        expected_new = reference.notify_failure()
        assert worker.notify_failure() == expected_new
        # jitter draws differ per process, so compare decisions; delays must stay in range
        assert worker.can_restart() == reference.can_restart()
        stored = json.dumps(state_to_json(worker.export_state()))
        clock.advance(30)
    assert json.loads(stored)["type"] == reference.type_name


def test_restoring_state_of_another_type_is_refused():
    fixed = load_restart_strategy({"restart-strategy.type": "fixed-delay"})
    with pytest.raises(ValueError, match=r"cannot restore fixed-delay .* from 'failure-rate'"):
        fixed.restore_state(state_from_json({"type": "failure-rate", "failure_times": []}))
    with pytest.raises(ValueError, match=r"malformed fixed-delay restart-strategy state: failures='3'"):
        fixed.restore_state(state_from_json({"type": "fixed-delay", "failures": "3"}))


def test_exponential_repr_names_every_setting():
    strategy = load_restart_strategy(SEED_000_EXAMPLE)
    assert repr(strategy) == (
        "ExponentialDelay(initial-backoff=1 s, max-backoff=10 s, backoff-multiplier=2, "
        "reset-backoff-threshold=1 h, jitter-factor=0, attempts-before-reset-backoff=infinite)"
    )
