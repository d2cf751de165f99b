"""Failure classification in the pure core: which failures are worth a restart, and their labels."""

import pytest

from airflow_ft_provider.failover.classification import (
    FailureFacts,
    FailureKind,
    FailureLabels,
    FailureRules,
    classify,
)

ANALYSIS = frozenset({"pyspark.errors.exceptions.connect.AnalysisException", "builtins.Exception"})


@pytest.mark.parametrize(
    "error_class, sql_state",
    [
        ("UNRESOLVED_COLUMN.WITH_SUGGESTION", "42703"),
        ("TABLE_OR_VIEW_NOT_FOUND", "42P01"),
        ("PARSE_SYNTAX_ERROR", "42601"),
        ("DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES", "42K09"),
    ],
)
def test_spark_analysis_errors_are_not_recoverable_user_code(error_class, sql_state):
    labels = classify(FailureFacts(ANALYSIS, error_class, sql_state))
    assert not labels.recoverable
    assert labels.kind is FailureKind.USER_CODE and labels.error_class == error_class
    assert sql_state in labels.reason and "analysis error" in labels.reason


def test_a_missing_path_is_lost_data_not_an_analysis_error():
    labels = classify(FailureFacts(ANALYSIS, "PATH_NOT_FOUND", "42K03"))
    assert labels.recoverable


def test_everything_else_is_recoverable_with_its_kind():
    runtime = classify(FailureFacts(frozenset({"builtins.RuntimeError"})))
    assert runtime.recoverable and runtime.kind is FailureKind.USER_CODE
    connection = classify(FailureFacts(frozenset({"builtins.ConnectionError", "builtins.OSError"})))
    assert connection.recoverable and connection.kind is FailureKind.INFRASTRUCTURE
    internal = classify(FailureFacts(ANALYSIS, "INTERNAL_ERROR", "XX000"))
    assert internal.recoverable and internal.kind is FailureKind.INFRASTRUCTURE
    timeout = classify(FailureFacts(frozenset({"airflow.sdk.exceptions.AirflowTaskTimeout"})))
    assert timeout.recoverable and timeout.kind is FailureKind.TIMEOUT
    lost = classify(FailureFacts(frozenset({"airflow_ft_provider.partitions.errors.PartitionNotFound"})))
    assert lost.recoverable and lost.kind is FailureKind.LOST_DATA
    # an object changed or gone between the try's check and the executors' read of it
    gone = classify(
        FailureFacts(
            frozenset(
                {"airflow_ft_provider.spark.partition_objects.PartitionDataCorrupt", "builtins.OSError"}
            )
        )
    )
    assert gone.recoverable and gone.kind is FailureKind.LOST_DATA
    killed = classify(FailureFacts(killed=True))
    assert killed.recoverable and killed.kind is FailureKind.KILLED


def test_airflow_fail_exception_and_configuration_errors_are_not_recoverable():
    for name in (
        "airflow.sdk.exceptions.AirflowFailException",
        "airflow_ft_provider.spark.stage_errors.StageIOError",
    ):
        labels = classify(FailureFacts(frozenset({name, "builtins.Exception"})))
        assert not labels.recoverable and name.rsplit(".", 1)[1] in labels.reason


def test_rules_extend_the_defaults_by_prefix_and_a_verdict_comes_first():
    rules = FailureRules().extended(
        FailureRules(
            non_recoverable_error_classes=("DIVIDE_BY_ZERO",),
            non_recoverable_sql_states=(),
            non_recoverable_exceptions=("mypkg.BadRecord",),
            recoverable_error_classes=(),
        )
    )
    assert not classify(FailureFacts(ANALYSIS, "DIVIDE_BY_ZERO", "22012"), rules).recoverable
    assert classify(
        FailureFacts(ANALYSIS, "DIVIDE_BY_ZEROES", "22012"), rules
    ).recoverable  # a prefix of words
    assert not classify(
        FailureFacts(ANALYSIS, "UNRESOLVED_COLUMN", "42703"), rules
    ).recoverable  # default kept
    assert not classify(FailureFacts(frozenset({"mypkg.BadRecord"})), rules).recoverable
    said = classify(
        FailureFacts(ANALYSIS, "UNRESOLVED_COLUMN", "42703", verdict=True, verdict_reason="flaky")
    )
    assert said.recoverable and said.reason == "flaky"


def test_recoverable_overrides_win_over_the_sql_state_default():
    rules = FailureRules(recoverable_error_classes=("TABLE_OR_VIEW_NOT_FOUND",))
    assert classify(FailureFacts(ANALYSIS, "TABLE_OR_VIEW_NOT_FOUND", "42P01"), rules).recoverable


@pytest.mark.parametrize(
    "kwargs, fix",
    [
        ({"non_recoverable_error_classes": "DIVIDE_BY_ZERO"}, "tuple"),
        ({"non_recoverable_error_classes": ("divide by zero",)}, "UNRESOLVED_COLUMN"),
        ({"non_recoverable_sql_states": ("4270399",)}, "22012"),
        ({"non_recoverable_exceptions": ("not a name!",)}, "mypackage.BadRecord"),
    ],
)
def test_invalid_rules_name_the_key_the_value_and_an_example(kwargs, fix):
    with pytest.raises(ValueError) as err:
        FailureRules(**kwargs)
    key, value = next(iter(kwargs.items()))
    assert key in str(err.value) and fix in str(err.value)


def test_labels_round_trip_and_refuse_what_this_release_does_not_write():
    labels = FailureLabels(
        False, FailureKind.USER_CODE, "UNRESOLVED_COLUMN.WITH_SUGGESTION", "analysis error"
    )
    assert FailureLabels.from_dict(labels.to_dict()) == labels
    assert labels.describe() == "user code, UNRESOLVED_COLUMN.WITH_SUGGESTION"
    for bad in (
        {"recoverable": "no", "kind": "user code"},
        {"recoverable": False, "kind": "cosmic rays"},
        {"recoverable": False, "kind": "user code", "error_class": "<script>"},
    ):
        with pytest.raises(ValueError):
            FailureLabels.from_dict(bad)
