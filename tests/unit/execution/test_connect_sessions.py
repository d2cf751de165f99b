"""A try's Spark Connect session record (execution/connect_sessions.py): stored JSON is validated,
and the connection string names the session without losing its other parameters."""

from __future__ import annotations

import pytest

from airflow_ft_provider.execution.connect_sessions import (
    SESSION_KEY,
    TrySession,
    previous_session,
    with_session_id,
)

SID = "6f1f3c1e-8a4b-4f5e-9c1d-2b3a4c5d6e7f"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sc://h:15002", f"sc://h:15002/;session_id={SID}"),
        ("sc://h:15002/", f"sc://h:15002/;session_id={SID}"),  # SparkConnectHook, no login
        ("sc://h:15002/;user_id=etl", f"sc://h:15002/;user_id=etl;session_id={SID}"),
        ("sc://h:1/;session_id=old;token=t", f"sc://h:1/;token=t;session_id={SID}"),
    ],
)
def test_the_connection_string_names_the_session(url, expected):
    assert with_session_id(url, SID) == expected


def test_a_record_round_trips_and_a_damaged_one_is_passed_over_with_the_reason():
    record = TrySession("sc://h:1", SID, 2)
    assert TrySession.from_json(record.to_json()) == record
    for damaged in (
        "x",
        {"server": "http://h", "session_id": SID, "try_number": 1},
        {"server": "sc://h:1", "session_id": "../x", "try_number": 1},
        {"server": "sc://h:1", "session_id": SID, "try_number": True},
    ):
        found, why = previous_session({SESSION_KEY: damaged})
        assert found is None and "is not a session record" in why
    assert previous_session(None) == (None, None) and previous_session({}) == (None, None)


def test_a_store_that_cannot_be_read_stops_nothing_and_says_why():
    class Unreachable:
        def get(self, key, default=None):
            raise ConnectionError("execution API down")

        def set(self, key, value):
            raise AssertionError("not called")

    found, why = previous_session(Unreachable())
    assert found is None and "execution API down" in why and "no earlier try's work stopped" in why
