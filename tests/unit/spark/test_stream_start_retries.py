"""The start of a foreachBatch streaming query is tried again only while the server's Python process
failed to connect back (spark/stream_start.py), a bounded number of times."""

import pytest

from airflow_ft_provider.spark.stream_start import CONNECT_BACK_FAILURE, START_ATTEMPTS, start_query


class Starts:
    """``start`` fails with the given errors in turn, then returns a query."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "query"


def connect_back():
    return RuntimeError(f"[SparkException] {CONNECT_BACK_FAILURE}.\n\nJVM stacktrace: ...")


def test_a_start_whose_python_process_did_not_connect_back_is_tried_again_after_growing_pauses():
    pauses = []
    start = Starts(connect_back(), connect_back())
    assert start_query(start, sleep=pauses.append) == "query"
    assert start.calls == 3 and pauses == [5.0, 10.0]


def test_the_last_attempt_fails_the_stage_with_sparks_error():
    pauses = []
    start = Starts(*[connect_back() for _ in range(START_ATTEMPTS)])
    with pytest.raises(RuntimeError, match=CONNECT_BACK_FAILURE):
        start_query(start, sleep=pauses.append)
    assert start.calls == START_ATTEMPTS and len(pauses) == START_ATTEMPTS - 1


def test_any_other_failure_is_the_stages_at_once():
    pauses = []
    start = Starts(ValueError("[STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION] output mode"))
    with pytest.raises(ValueError, match="output mode"):
        start_query(start, sleep=pauses.append)
    assert start.calls == 1 and pauses == []
