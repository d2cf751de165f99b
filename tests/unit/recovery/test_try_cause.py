"""Why a try runs, read from a run's history (recovery/try_cause.py): the pipeline is

A --a--> [ B ~~b~~> C ] --c--> D          (B and C: one region)
"""

from __future__ import annotations

from airflow_ft_provider.recovery.journal_events import FailoverRecorded, ManualRestart, OutputsReused
from airflow_ft_provider.recovery.try_cause import Cause, try_cause

PRODUCERS = {"a": "A", "b": "B", "c": "C"}


def cause(events, task, try_number, started_at=100.0):
    return try_cause(events, task, try_number, started_at=started_at, producer_of=PRODUCERS.get)


def c_failed(at=50.0, *, lost=(), regions=(("B", "C"), ("D",))):
    return FailoverRecorded(
        time=at,
        task="C",
        failed_task="C",
        try_number=1,
        restart=True,
        regions=regions,
        tasks=tuple(sorted({t for r in regions for t in r})),
        unavailable=lost,
        cause="ValueError: boom",
    )


def test_a_first_try_runs_because_it_is_the_first_whatever_the_history_says():
    assert cause([c_failed()], "C", 1).cause is Cause.FIRST


def test_the_failed_task_and_the_rest_of_its_region_restart_with_the_failure_named():
    for task in ("C", "B"):
        found = cause([c_failed()], task, 2)
        assert (found.cause, found.failed_task) == (Cause.REGION_RESTART, "C")
        assert "C failed: ValueError: boom" == found.reason


def test_a_consumer_region_is_rescheduled_and_a_lost_input_s_producer_backtracks():
    assert cause([c_failed()], "D", 2).cause is Cause.CONSUMER_RESTART
    lost = c_failed(lost=("a",), regions=(("A",), ("B", "C"), ("D",)))
    found = cause([lost], "A", 2)
    assert (found.cause, found.lost, found.failed_task) == (Cause.BACKTRACKING, ("a",), "C")
    assert cause([lost], "B", 2).cause is Cause.REGION_RESTART  # its region failed: not a rebuild


def test_the_newest_decision_before_the_try_started_is_its_cause_and_later_ones_are_not():
    manual = ManualRestart(time=70.0, task="D", regions=(("D",),), tasks=("D",), reason="by hand", user="ann")
    later = c_failed(at=150.0)
    found = cause([c_failed(), manual, later], "D", 3)
    assert (found.cause, found.user, found.reason) == (Cause.MANUAL_RESTART, "ann", "by hand")
    assert cause([c_failed(), manual, later], "D", 3, started_at=60.0).cause is Cause.CONSUMER_RESTART


def test_a_later_try_no_decision_names_is_a_plain_retry():
    no_restart = FailoverRecorded(time=50.0, task="C", failed_task="C", restart=False, tasks=("B", "C"))
    reused = OutputsReused(time=60.0, task="D", try_number=2)
    assert cause([no_restart, reused], "C", 2).cause is Cause.RETRY
    assert cause([], "D", 2).cause is Cause.RETRY
