"""Failure classification's adapter: facts from exceptions (Spark's, wrapped, a spark-submit driver's
report), the rules a pipeline and a stage give, checked at parse time."""

import json
import subprocess
import sys

import pytest

from airflow_ft_provider.failover.classification import FailureKind, FailureLabels, FailureRules
from airflow_ft_provider.recovery.failure_facts import (
    StageClassification,
    failure_classifier,
    failure_facts,
    failure_rules,
)
from airflow_ft_provider.spark.failure_report import DriverFailure, read_report

STREAM_FAILED = (
    "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: "
    "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `idd` "
    "cannot be resolved. Did you mean one of the following? [`id`]. SQLSTATE: 42703; SQLSTATE: XXKST"
)


class SparkLike(Exception):
    """What Spark's exceptions answer (pyspark's AnalysisException needs a JVM or a server to make)."""

    def __init__(self, message, condition, state):
        super().__init__(message)
        self.condition, self.state = condition, state

    def getCondition(self):  # noqa: N802
        return self.condition

    def getSqlState(self):  # noqa: N802
        return self.state


def test_a_wrapped_streaming_failure_is_classified_by_the_error_inside():
    facts = failure_facts(SparkLike(STREAM_FAILED, "STREAM_FAILED", "XXKST"))
    assert (facts.error_class, facts.sql_state) == ("UNRESOLVED_COLUMN.WITH_SUGGESTION", "42703")
    assert not StageClassification().labels(SparkLike(STREAM_FAILED, "STREAM_FAILED", "XXKST")).recoverable


def test_a_cause_chain_is_searched_and_every_type_with_its_bases_is_a_fact():
    try:
        try:
            raise SparkLike("bad", "TABLE_OR_VIEW_NOT_FOUND", "42P01")
        except SparkLike as inner:
            raise RuntimeError("stage failed") from inner
    except RuntimeError as outer:
        facts = failure_facts(outer)
    assert facts.error_class == "TABLE_OR_VIEW_NOT_FOUND" and facts.sql_state == "42P01"
    assert {"builtins.RuntimeError", f"{__name__}.SparkLike", "builtins.Exception"} <= facts.exception_types


def test_bracketed_words_without_a_sqlstate_are_not_taken_for_an_error_class():
    assert failure_facts(RuntimeError("[ERROR] the disk is full")).error_class is None


def test_a_spark_submit_drivers_uncaught_exception_is_reported_and_read_back(tmp_path):
    report = tmp_path / "driver-failure.json"
    driver = (
        "from airflow_ft_provider.spark.failure_report import report_uncaught\n"
        f"report_uncaught({str(report)!r})\n"
        "class AnalysisException(Exception):\n"
        "    def getCondition(self): return 'UNRESOLVED_COLUMN.WITH_SUGGESTION'\n"
        "    def getSqlState(self): return '42703'\n"
        "raise AnalysisException('A column with name `idd` cannot be resolved')\n"
    )
    ended = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True)
    assert ended.returncode == 1 and "AnalysisException" in ended.stderr  # the usual traceback still
    failure = read_report(str(report))
    assert isinstance(failure, DriverFailure) and "`idd` cannot be resolved" in str(failure)
    facts = failure_facts(failure)
    assert (facts.error_class, facts.sql_state) == ("UNRESOLVED_COLUMN.WITH_SUGGESTION", "42703")
    assert "__main__.AnalysisException" in facts.exception_types


@pytest.mark.parametrize(
    "report",
    [
        "not json",
        json.dumps(["a list"]),
        json.dumps({"message": "m", "exception_types": ["a b"], "condition": None, "sql_state": None}),
        json.dumps({"message": "m", "exception_types": [], "condition": "<script>", "sql_state": None}),
        json.dumps({"message": "m", "exception_types": [], "condition": None, "sql_state": "4270399"}),
        json.dumps({"message": "m" * 70_000, "exception_types": []}),
    ],
)
def test_a_report_that_is_not_one_is_ignored(tmp_path, report):
    path = tmp_path / "driver-failure.json"
    path.write_text(report)
    assert read_report(str(path)) is None
    assert read_report(str(tmp_path / "absent.json")) is None


def test_rules_from_a_dict_with_exception_classes_and_a_classifier_that_comes_first():
    class BadRecord(ValueError):
        pass

    rules = failure_rules({"non_recoverable_exceptions": [BadRecord]}, "stage 'x'")
    assert rules.non_recoverable_exceptions == (f"{BadRecord.__module__}.{BadRecord.__qualname__}",)
    stage = StageClassification().extended(rules, None)
    assert not stage.labels(BadRecord("order 17")).recoverable
    assert stage.labels(ValueError("other")).recoverable
    assert not stage.labels(SparkLike("x", "UNRESOLVED_COLUMN", "42703")).recoverable  # defaults kept

    def lenient(failure):
        return True if "idd" in str(failure) else None

    forgiving = stage.extended(None, lenient)
    labels = forgiving.labels(SparkLike("`idd`", "UNRESOLVED_COLUMN", "42703"))
    assert labels.recoverable and "lenient" in labels.reason

    def broken(failure):
        raise KeyError("oops")

    assert not stage.extended(None, broken).labels(SparkLike("x", "UNRESOLVED_COLUMN", "42703")).recoverable


@pytest.mark.parametrize(
    "value, words",
    [
        ("DIVIDE_BY_ZERO", "give FailureRules(...) or a dict"),
        ({"non_recoverable": ["X"]}, "unknown key(s) ['non_recoverable']"),
        ({"non_recoverable_error_classes": ["divide by zero"]}, "'divide by zero' is not a valid name"),
    ],
)
def test_invalid_rules_fail_at_parse_time_with_the_key_and_the_fix(value, words):
    with pytest.raises(ValueError) as err:
        failure_rules(value, "stage 'orders'")
    assert "stage 'orders'" in str(err.value) and words in str(err.value)


def test_a_classifier_must_be_a_function():
    with pytest.raises(ValueError, match="give a function"):
        failure_classifier("lenient", "FailoverPipeline")
    assert failure_rules(FailureRules(), "x") == FailureRules()


def test_the_kind_labels_of_common_failures():
    assert StageClassification().labels(ConnectionResetError("reset")).kind is FailureKind.INFRASTRUCTURE
    assert StageClassification().labels(TimeoutError()).kind is FailureKind.TIMEOUT
    labels = StageClassification().labels(RuntimeError("the service said no"))
    assert labels == FailureLabels(True, FailureKind.USER_CODE)


def _raised(make):
    try:
        make()
    except Exception as err:  # noqa: BLE001 - the test wants the raised exception with its chain
        return err
    raise AssertionError("nothing raised")


PRICES = {"apple": 1}


@pytest.mark.parametrize(
    "bug, name",
    [
        (lambda: PRICES["banana"], "KeyError"),
        (lambda: [][3], "IndexError"),
        (lambda: 1 / 0, "ZeroDivisionError"),
        (lambda: None + 1, "TypeError"),
        (lambda: PRICES.amount, "AttributeError"),
        (lambda: undefined_name, "NameError"),  # noqa: F821
        (lambda: __import__("no_such_module_here"), "ImportError"),
    ],
)
def test_a_programming_error_is_not_recoverable_by_default_and_says_so(bug, name):
    labels = StageClassification().labels(_raised(bug))
    assert not labels.recoverable and labels.kind is FailureKind.USER_CODE
    assert (
        labels.reason.startswith(f"{name} is a programming error")
        and "recoverable_exceptions" in labels.reason
    )


def test_a_subclass_of_a_programming_error_is_one_too_and_a_chain_with_the_infrastructure_is_not():
    class PySparkTypeErrorLike(TypeError):
        pass

    assert not StageClassification().labels(PySparkTypeErrorLike("bad argument")).recoverable

    def lookup_then_connect():
        try:
            PRICES["banana"]
        except KeyError:
            raise ConnectionResetError("the price service went away") from None

    def connect_then_lookup():
        try:
            raise ConnectionResetError("reset")
        except ConnectionResetError:
            PRICES["banana"]  # a KeyError raised while a connection failed: the restart may heal it

    # from None: the KeyError is not part of the failure
    assert StageClassification().labels(_raised(lookup_then_connect)).recoverable
    labels = StageClassification().labels(_raised(connect_then_lookup))
    assert labels.recoverable and labels.kind is FailureKind.INFRASTRUCTURE


def test_rules_take_exception_classes_and_recoverable_exceptions_narrow_the_defaults():
    class BadRecord(Exception):
        pass

    class FlakyLookup(KeyError):
        pass

    rules = FailureRules(non_recoverable_exceptions=(BadRecord,), recoverable_exceptions=(FlakyLookup,))
    assert f"{BadRecord.__module__}.{BadRecord.__qualname__}" in rules.non_recoverable_exceptions
    stage = StageClassification().extended(rules, None)
    assert not stage.labels(BadRecord("row 7")).recoverable
    assert stage.labels(FlakyLookup("try later")).recoverable
    assert not stage.labels(KeyError("banana")).recoverable  # the default stays for the others
    as_dict = failure_rules({"recoverable_exceptions": [FlakyLookup]}, "FailoverPipeline")
    assert StageClassification().extended(as_dict, None).labels(FlakyLookup("x")).recoverable
    with pytest.raises(ValueError, match="recoverable_exceptions: 'no such' is not a valid name"):
        FailureRules(recoverable_exceptions=("no such",))


def test_an_injected_fault_is_labelled_as_one_whatever_spark_said_inside():
    from airflow_ft_provider.faults.injection import InjectedFailure

    def injected_over_a_spark_error():
        try:
            raise SparkLike(
                "[FAILED_READ_FILE.NO_HINT] cannot read ft-injected-failure-3.parquet",
                "FAILED_READ_FILE.NO_HINT",
                "KD001",
            )
        except SparkLike:
            raise InjectedFailure("injected failure inside micro-batch 3 (ft_faults)") from None

    labels = StageClassification().labels(_raised(injected_over_a_spark_error))
    assert labels == FailureLabels(True, FailureKind.INJECTED)
    assert labels.describe() == "injected fault"
