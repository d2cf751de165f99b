"""The record of a try's finished Spark work in task_state_store (execution/finished_work.py)."""

from __future__ import annotations

import pytest

from airflow_ft_provider.execution.finished_work import (
    FINISHED_KEY,
    FinishedOutput,
    FinishedWork,
    earlier_finished_work,
)

WORK = FinishedWork(
    try_number=1,
    host="worker-1",
    workdir="/tmp/ft-stage-abc",
    inputs={"b": "t1-0123456789abcdef"},
    lineage="ab" * 32,
    outputs={"d": FinishedOutput("file:///tmp/ft-stage-abc/out/d", None, 40, "rows1:" + "cd" * 16)},
)


def output(**change):
    return {
        "outputs": {"d": {"location": "s3a://b/k", "attempt": None, "rows": 1, "content": None, **change}}
    }


class StateStore:
    def __init__(self, value=None, error=None):
        self.value, self.error = value, error

    def get(self, key, default=None):
        assert key == FINISHED_KEY
        if self.error:
            raise self.error
        return self.value

    def set(self, key, value):
        self.value = value


def test_a_record_round_trips_and_only_an_earlier_try_finds_it():
    assert FinishedWork.from_json(WORK.to_json()) == WORK
    state = StateStore(WORK.to_json())
    assert earlier_finished_work(state, 2) == (WORK, None)
    assert earlier_finished_work(state, 1) == (None, None)  # its own try: nothing left over
    assert earlier_finished_work(StateStore(None), 2) == (None, None)
    assert earlier_finished_work(None, 2) == (None, None)


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"try_number": -1}, "'try_number' must be a whole number"),
        ({"host": ""}, "'host' must be a non-empty string"),
        ({"outputs": []}, "'outputs' must be an object"),
        ({"lineage": "xyz"}, "'lineage' is not a lineage digest"),
        (
            {"outputs": {"d": {"location": "/etc", "attempt": None, "rows": 1, "content": None}}},
            "file://, s3:// or s3a://",
        ),
        (
            {"outputs": {"d": {"location": "s3a://b/k", "attempt": None, "rows": True, "content": None}}},
            "'rows'",
        ),
        (
            {"outputs": {"d": {"location": "s3a://b/k", "attempt": None, "rows": 1, "content": "x"}}},
            "row checksum",
        ),
    ],
)
def test_a_damaged_record_is_passed_over_saying_why(change, problem):
    passed, why = earlier_finished_work(StateStore({**WORK.to_json(), **change}), 2)
    assert passed is None and problem in why and FINISHED_KEY in why


def test_an_unreadable_store_means_running_spark():
    passed, why = earlier_finished_work(StateStore(error=ConnectionError("API down")), 2)
    assert passed is None and "API down" in why
