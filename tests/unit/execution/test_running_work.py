"""The record of a try's Spark Connect work in flight, in task_state_store (execution/running_work.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_ft_provider.execution.connect_sessions import TrySession
from airflow_ft_provider.execution.running_work import RUNNING_KEY, RunningWork, earlier_running_work

SESSION = TrySession("sc://spark:15002", "4f0c7a0e-8b4c-4e63-9d53-3d1f0c2f6a10", 1)
WORK = RunningWork(
    session=SESSION,
    host="worker-1",
    workdir="/tmp/ft-stage-abc",
    inputs={"b": "t1-0123456789abcdef"},
    lineage="ab" * 32,
    outputs={"d": "file:///tmp/ft-stage-abc/out/d"},
)


IN_S3 = replace(  # the executors' path: an attempt in S3, adoptable from any worker
    WORK,
    outputs={"d": "s3://lake/p/run/blocking/d/-1/attempts/t1-fedcba9876543210/"},
    attempts={"d": "t1-fedcba9876543210"},
)


class StateStore:
    def __init__(self, value=None, error=None):
        self.value, self.error = value, error

    def get(self, key, default=None):
        assert key == RUNNING_KEY
        if self.error:
            raise self.error
        return self.value


def test_a_record_round_trips_and_only_a_later_try_finds_it():
    assert RunningWork.from_json(WORK.to_json()) == WORK
    assert "attempts" not in WORK.to_json()  # a staged record reads as it did before S3 attempts
    assert RunningWork.from_json(IN_S3.to_json()) == IN_S3
    assert WORK.staged and not IN_S3.staged
    assert earlier_running_work(StateStore(WORK.to_json()), 2) == (WORK, None)
    assert earlier_running_work(StateStore(WORK.to_json()), 1) == (None, None)  # its own record
    assert earlier_running_work(StateStore(None), 2) == (None, None)
    assert earlier_running_work(None, 2) == (None, None)


@pytest.mark.parametrize(
    "change, problem",
    [
        # The next try removes the work directory once it adopted or passed over its output: a record
        # must not name any other directory, nor outputs outside it.
        ({"workdir": "/home/etl"}, "'workdir' must be a try's scratch directory"),
        ({"workdir": "ft-stage-abc"}, "'workdir' must be a try's scratch directory"),
        ({"workdir": "/tmp/ft-stage-abc/../etl"}, "'workdir' must be a try's scratch directory"),
        ({"outputs": {"d": "file:///etc/passwd"}}, "must be staged (file://) under"),
        ({"outputs": {"d": "file:///tmp/ft-stage-abc/../x"}}, "must be staged (file://) under"),
        ({"outputs": {"d": "s3a://bucket/key"}}, "must be staged (file://) under"),
        ({"session": {"server": "http://x", "session_id": SESSION.session_id, "try_number": 1}}, "'server'"),
        ({"session": None}, "expected an object"),
        ({"lineage": "xyz"}, "'lineage' is not a lineage digest"),
        ({"inputs": {"b": 7}}, "'input attempt' must be a non-empty string"),
        ({"host": ""}, "'host' must be a non-empty string"),
        # an S3 output is the attempt the record names; the commit fences it like any other
        ({"outputs": {"d": "s3://lake/x/"}}, "or an s3:// attempt with its attempt id"),
        ({"outputs": {"d": "s3://lake/x/"}, "attempts": {"d": "../t1"}}, "invalid attempt id"),
        ({"attempts": {"e": "t1-fedcba9876543210"}}, "'attempts' names outputs the record does not have"),
        (
            {"outputs": {"d": "file:///tmp/ft-stage-abc/out/d", "e": "s3://l/x/"}, "attempts": {"e": "t1-a"}},
            "the outputs must be all staged or all in S3",
        ),
    ],
)
def test_a_damaged_or_hostile_record_is_refused_saying_why(change, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        RunningWork.from_json({**WORK.to_json(), **change})
    work, passed_over = earlier_running_work(StateStore({**WORK.to_json(), **change}), 2)
    assert work is None and "is not a running-work record" in passed_over and "passed over" in passed_over


def test_an_unreadable_store_is_said_and_passed_over():
    work, passed_over = earlier_running_work(StateStore(error=RuntimeError("API down")), 2)
    assert work is None and "could not read task_state_store['ft_running_work'] (API down)" in passed_over
