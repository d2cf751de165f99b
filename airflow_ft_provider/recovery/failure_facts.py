"""A failed try's exception as the core's ``FailureFacts``, classified with its stage's rules.

The facts are text (type names, Spark's error class and SQLSTATE), so the core decides without
importing Airflow or Spark. Spark's exceptions carry their error class (``getCondition``); where only
a message is left (a wrapped failure: a streaming query's ``STREAM_FAILED``, a Python UDF's
``PYTHON_EXCEPTION``, a spark-submit driver's report) the first error class in it that is not a
wrapper is taken, with the SQLSTATE Spark prints after it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_ft_provider.failover.classification import (
    FailureFacts,
    FailureLabels,
    FailureRules,
    classify,
)
from airflow_ft_provider.spark.failure_report import DriverFailure, exception_chain, spark_field, type_names

log = logging.getLogger(__name__)

FailureClassifier = Callable[[BaseException], "bool | None"]  # True: recoverable, False: not, None: rules

WRAPPERS = frozenset(
    {"STREAM_FAILED", "PYTHON_EXCEPTION", "FOREACH_BATCH_USER_FUNCTION_ERROR", "FAILED_EXECUTE_UDF"}
)
_ERROR_CLASS_IN_TEXT = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")
_SQL_STATE_IN_TEXT = re.compile(r"SQLSTATE: ([0-9A-Z]{5})\b")
RULE_KEYS = (
    "non_recoverable_error_classes",
    "non_recoverable_sql_states",
    "non_recoverable_exceptions",
    "recoverable_error_classes",
    "recoverable_exceptions",
)


@dataclass(frozen=True)
class StageClassification:
    """The rules a stage's failures are classified with: its pipeline's, extended by its own."""

    rules: FailureRules = FailureRules()
    classifiers: tuple[FailureClassifier, ...] = ()  # the stage's first, then the pipeline's

    def labels(self, failure: BaseException) -> FailureLabels:
        verdict, reason = None, ""
        for classifier in self.classifiers:
            try:
                verdict = classifier(failure)
            except Exception as err:  # noqa: BLE001 - a broken classifier must not hide the failure
                log.warning("failure classifier %r raised %s: using the rules", classifier, err)
                continue
            if verdict is not None:
                name = getattr(classifier, "__qualname__", repr(classifier))
                reason = f"{name} says it is {'' if verdict else 'not '}recoverable"
                break
        return classify(failure_facts(failure, verdict=verdict, verdict_reason=reason), self.rules)

    def extended(
        self, rules: FailureRules | None, classifier: FailureClassifier | None
    ) -> StageClassification:
        return StageClassification(
            self.rules.extended(rules) if rules is not None else self.rules,
            ((classifier,) if classifier is not None else ()) + self.classifiers,
        )


def failure_facts(
    failure: BaseException, *, verdict: bool | None = None, verdict_reason: str = ""
) -> FailureFacts:
    chain = exception_chain(failure)
    types = frozenset(type_names(chain))
    types |= {name for e in chain if isinstance(e, DriverFailure) for name in e.exception_types}
    error_class, sql_state = _spark_error(chain)
    return FailureFacts(
        exception_types=types,
        error_class=error_class,
        sql_state=sql_state,
        verdict=verdict,
        verdict_reason=verdict_reason,
    )


def failure_rules(value: object, where: str) -> FailureRules | None:
    """``failure_rules=`` as given to a pipeline or a stage (FailureRules, a dict of its keys, None),
    checked when the DAG is parsed; exception classes may be given as classes."""
    if value is None or isinstance(value, FailureRules):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(
            f"{where} failure_rules={value!r}: give FailureRules(...) or a dict with the keys "
            f"{', '.join(RULE_KEYS)}"
        )
    unknown = sorted(set(value) - set(RULE_KEYS))
    if unknown:
        raise ValueError(
            f"{where} failure_rules: unknown key(s) {unknown}; the keys are {', '.join(RULE_KEYS)}"
        )
    given: dict[str, Any] = {key: _as_tuple(value.get(key, ())) for key in RULE_KEYS}  # checked by it
    try:
        return FailureRules(**given)
    except ValueError as err:
        raise ValueError(f"{where} failure_rules: {err}") from None


def failure_classifier(value: object, where: str) -> FailureClassifier | None:
    if value is None or callable(value):
        return value
    raise ValueError(
        f"{where} failure_classifier={value!r}: give a function (exception) -> True (recoverable), "
        "False (not recoverable) or None (the rules decide)"
    )


def _as_tuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def _spark_error(chain: list[BaseException]) -> tuple[str | None, str | None]:
    """Spark's error class and SQLSTATE of the failure: the innermost that is not a wrapper."""
    for failure in chain:
        condition = spark_field(failure, "getCondition") or spark_field(failure, "getErrorClass")
        if condition and condition.split(".")[0] not in WRAPPERS:
            return condition, spark_field(failure, "getSqlState")
    for failure in chain:  # a bracketed name counts only with the SQLSTATE Spark prints after it
        text = str(failure)
        for match in _ERROR_CLASS_IN_TEXT.finditer(text):
            state = _SQL_STATE_IN_TEXT.search(text, match.end())
            if match.group(1).split(".")[0] not in WRAPPERS and state:
                return match.group(1), state.group(1)
    return None, None
