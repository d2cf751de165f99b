"""Why a spark-submit stage's driver failed, told to the operator that started it.

``spark-submit`` ends with an exit code; the driver's exception (a misspelt column is an
``AnalysisException`` with error class ``UNRESOLVED_COLUMN.WITH_SUGGESTION``) stays in its log. So the
driver installs ``report_uncaught`` (``stage_io.for_session`` does): an uncaught exception is written,
as small validated JSON, to the file the operator named in the Spark conf, and the operator raises it
again as a ``DriverFailure``, which failure classification reads like Spark's own exceptions. Stdlib
only: this runs in the driver.
"""

from __future__ import annotations

import json
import os
import re
import sys
from types import TracebackType

FAILURE_REPORT_CONF = "spark.airflow_ft.failure_report"
MAX_REPORT_BYTES = 64 * 1024
MAX_CHAIN = 20
_ERROR_CLASS = re.compile(r"^[A-Z][A-Z0-9_]*(\.[A-Z0-9_]+)*\Z")
_SQL_STATE = re.compile(r"^[0-9A-Z]{5}\Z")
# a qualified class name; "<locals>" for a class defined in a function
_TYPE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.([A-Za-z_][A-Za-z0-9_]*|<locals>))*\Z")


class InjectedFailure(RuntimeError):
    """A failure the run's ``ft_faults`` asked for: labelled an injected fault, never user code. Defined
    here, stdlib only, so that a spark-submit driver raises (and reports) the same class as a try."""


def injected_in_batch(batch: int | None) -> str:
    """What a fault injected inside micro-batch ``batch`` says, wherever it is raised or recognised."""
    return f"injected failure inside micro-batch {batch} (ft_faults)"


class DriverFailure(RuntimeError):
    """A spark-submit driver's uncaught exception, as its report told it."""

    def __init__(
        self, message: str, *, condition: str | None, sql_state: str | None, exception_types: tuple[str, ...]
    ) -> None:
        super().__init__(message)
        self.condition = condition
        self.sql_state = sql_state
        self.exception_types = exception_types

    def getCondition(self) -> str | None:  # noqa: N802 - named as Spark's exceptions name it
        return self.condition

    def getSqlState(self) -> str | None:  # noqa: N802
        return self.sql_state


def report_uncaught(path: str) -> None:
    """Make an uncaught exception of this process write its report to ``path`` before it ends it."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        try:
            _write(path, value)
        except Exception:  # noqa: BLE001, S110 - the report is a courtesy; the exit code still tells
            pass
        previous(kind, value, tb)

    sys.excepthook = hook


def exception_chain(failure: BaseException) -> list[BaseException]:
    """``failure`` and its causes (``__cause__``, else ``__context__`` unless ``raise ... from None``
    suppressed it, as a traceback would), at most MAX_CHAIN, no cycles."""
    chain: list[BaseException] = []
    current: BaseException | None = failure
    seen: set[int] = set()
    while current is not None and id(current) not in seen and len(chain) < MAX_CHAIN:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain


def type_names(chain: list[BaseException]) -> set[str]:
    """The qualified names of the exceptions' classes and of all their bases."""
    return {f"{c.__module__}.{c.__qualname__}" for e in chain for c in type(e).__mro__}


def spark_field(failure: BaseException, method: str) -> str | None:
    """What a Spark exception answers to ``getCondition``/``getSqlState``/…; None for anything else."""
    getter = getattr(failure, method, None)
    try:
        value = getter() if callable(getter) else None
    except Exception:  # noqa: BLE001 - a Spark exception without the field
        return None
    return value if isinstance(value, str) and value else None


def _write(path: str, failure: BaseException) -> None:
    chain = exception_chain(failure)
    condition = sql_state = None
    for exc in chain:
        condition = spark_field(exc, "getCondition") or spark_field(exc, "getErrorClass")
        if condition:
            sql_state = spark_field(exc, "getSqlState")
            break
    report = {
        "message": f"{type(failure).__name__}: {str(failure).strip()[:2000]}",
        "condition": condition,
        "sql_state": sql_state,
        "exception_types": sorted(type_names(chain)),
    }
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as out:
        json.dump(report, out)
    os.replace(temporary, path)  # whole or not at all


def read_report(path: str) -> DriverFailure | None:
    """The driver's report, or None when there is none or it is not one this module writes."""
    try:
        with open(path, "rb") as source:
            data = source.read(MAX_REPORT_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_REPORT_BYTES:
        return None
    try:
        report = json.loads(data)
    except ValueError:
        return None
    if not isinstance(report, dict):
        return None
    message, condition, state, types = (
        report.get("message"),
        report.get("condition"),
        report.get("sql_state"),
        report.get("exception_types"),
    )
    if not isinstance(message, str) or not isinstance(types, list):
        return None
    if not all(isinstance(t, str) and _TYPE_NAME.match(t) for t in types) or len(types) > 200:
        return None
    if condition is not None and not (isinstance(condition, str) and _ERROR_CLASS.match(condition)):
        return None
    if state is not None and not (isinstance(state, str) and _SQL_STATE.match(state)):
        return None
    return DriverFailure(
        f"the Spark driver failed: {message[:2000]}",
        condition=condition,
        sql_state=state,
        exception_types=tuple(types),
    )
