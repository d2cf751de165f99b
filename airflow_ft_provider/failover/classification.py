"""Whether a failure is worth a restart, and what kind it is, before the restart strategy is asked.

Flink suppresses restarts for failures that cannot heal (``SuppressRestartsException``) and labels
failures (FLIP-304's failure enrichers). Here a failure is described by plain facts an adapter extracts
from the exception (``FailureFacts``: type names, Spark's error class and SQLSTATE); ``classify``
applies the pipeline's rules (``FailureRules``) and returns ``FailureLabels``: recoverable or not,
the kind, the error class, and why in words. A non-recoverable failure fails its task at once and
counts as no restart: a misspelt column fails once, clearly, instead of restarting for days.

Defaults: Spark's analysis errors (SQLSTATE class 42: unresolved columns and tables, parse errors,
type mismatches) except a missing path, which is lost data; Airflow's ``AirflowFailException``; this
provider's configuration errors; and the Python exceptions that mean a programming error
(``PROGRAMMING_ERRORS``: ``KeyError``, ``TypeError`` ...), which fail the same way on every try. A
programming error raised while the infrastructure failed (a connection, the store, a timeout in the same
chain) is left to the restart strategy: the restart may heal its cause. Everything else is recoverable.
``recoverable_exceptions`` narrows the defaults (``KeyError`` of a flaky lookup service, say).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

ERROR_CLASS = re.compile(r"^[A-Z][A-Z0-9_]*(\.[A-Z0-9_]+)*\Z")
SQL_STATE_PREFIX = re.compile(r"^[0-9A-Z]{1,5}\Z")
# a qualified class name; "<locals>" for a class defined in a function
TYPE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.([A-Za-z_][A-Za-z0-9_]*|<locals>))*\Z")

DEFAULT_NON_RECOVERABLE_SQL_STATES = ("42",)  # Spark's analysis errors
DEFAULT_RECOVERABLE_ERROR_CLASSES = ("PATH_NOT_FOUND",)  # SQLSTATE 42K03, but a lost input: backtracking
# Python's own errors of a program, not of its environment: a restart runs the same code on the same
# input and fails the same way. (Their subclasses too: pyspark's PySparkTypeError is a TypeError.)
PROGRAMMING_ERRORS = (
    "builtins.NameError",  # UnboundLocalError too
    "builtins.TypeError",
    "builtins.AttributeError",
    "builtins.KeyError",
    "builtins.IndexError",
    "builtins.ZeroDivisionError",
    "builtins.AssertionError",
    "builtins.ImportError",  # ModuleNotFoundError too
    "builtins.SyntaxError",
    "builtins.NotImplementedError",
)
DEFAULT_NON_RECOVERABLE_EXCEPTIONS = (
    *PROGRAMMING_ERRORS,
    "airflow.sdk.exceptions.AirflowFailException",
    "airflow.exceptions.AirflowFailException",
    "airflow_ft_provider.spark.stage_errors.StageIOError",  # the stage uses the io API wrongly
    "airflow_ft_provider.checkpoints.config.CheckpointConfigError",
    "airflow_ft_provider.model.description.PipelineWiringError",
    "airflow_ft_provider.model.data_path.SparkElsewhere",  # staged, with Spark on another machine
    "airflow_ft_provider.spark.object_stream.InvalidStreamMarker",  # a restart resumes past it: alike
)
_INFRASTRUCTURE_EXCEPTIONS = (
    "builtins.ConnectionError",
    "builtins.OSError",
    "airflow_ft_provider.partitions.errors.PartitionStoreError",
    "airflow_ft_provider.hooks.airflow_api.AirflowApiError",
    "grpc.RpcError",  # the transport to a Spark Connect server (its analysis errors carry a SQLSTATE)
)
_INFRASTRUCTURE_SQL_STATES = ("08", "53", "54", "57", "58", "XX")  # connection, resources, system
_TIMEOUT_EXCEPTIONS = (
    "builtins.TimeoutError",
    "airflow.sdk.exceptions.AirflowTaskTimeout",
    "airflow.exceptions.AirflowTaskTimeout",
    "airflow_ft_provider.checkpoints.store_copy.CheckpointTimeout",
)
_LOST_DATA_EXCEPTIONS = (
    "airflow_ft_provider.partitions.errors.PartitionNotFound",
    # an executor's (or the executors' path's schema) read of an object changed or gone since the check
    "airflow_ft_provider.spark.partition_objects.PartitionDataCorrupt",
)
_INJECTED_EXCEPTIONS = ("airflow_ft_provider.spark.failure_report.InjectedFailure",)  # ft_faults


def exception_name(value: str | type[BaseException]) -> str:
    """An exception class as the qualified name the core matches (``builtins.KeyError``); a name as is."""
    return f"{value.__module__}.{value.__qualname__}" if isinstance(value, type) else value


class FailureKind(enum.Enum):
    USER_CODE = "user code"
    INFRASTRUCTURE = "infrastructure"
    LOST_DATA = "lost data"
    TIMEOUT = "timeout"
    KILLED = "killed"
    INJECTED = "injected fault"  # ft_faults asked for it (tests, demos, chaos runs)


@dataclass(frozen=True)
class FailureFacts:
    """What an adapter knows about one failure, as text: nothing here holds the exception."""

    exception_types: frozenset[str] = frozenset()  # qualified names: every exception of the chain, bases too
    error_class: str | None = None  # Spark's error class (condition), e.g. UNRESOLVED_COLUMN.WITH_SUGGESTION
    sql_state: str | None = None  # e.g. 42703
    lost_data: bool = False  # an input partition is unavailable (backtracking rebuilds it)
    killed: bool = False  # the try was killed (no exception reached the retry policy)
    verdict: bool | None = None  # a user classifier's answer: recoverable or not; None: the rules decide
    verdict_reason: str = ""


@dataclass(frozen=True)
class FailureRules:
    """A pipeline's (or stage's) classification, on top of the defaults. Names are matched by prefix:
    ``UNRESOLVED_COLUMN`` covers ``UNRESOLVED_COLUMN.WITH_SUGGESTION``, ``42`` every ``42xxx``."""

    non_recoverable_error_classes: tuple[str, ...] = ()
    non_recoverable_sql_states: tuple[str, ...] = DEFAULT_NON_RECOVERABLE_SQL_STATES
    non_recoverable_exceptions: tuple[str | type[BaseException], ...] = DEFAULT_NON_RECOVERABLE_EXCEPTIONS
    recoverable_error_classes: tuple[str, ...] = DEFAULT_RECOVERABLE_ERROR_CLASSES
    # Recoverable although a non-recoverable name matches too (a default narrowed): checked first.
    recoverable_exceptions: tuple[str | type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        for name in ("non_recoverable_exceptions", "recoverable_exceptions"):
            values = getattr(self, name)
            if isinstance(values, tuple):  # classes as the qualified names the core matches
                object.__setattr__(self, name, tuple(map(exception_name, values)))
        for name, pattern, example in (
            ("non_recoverable_error_classes", ERROR_CLASS, "UNRESOLVED_COLUMN"),
            ("non_recoverable_sql_states", SQL_STATE_PREFIX, "42 or 22012"),
            ("non_recoverable_exceptions", TYPE_NAME, "mypackage.BadRecord"),
            ("recoverable_error_classes", ERROR_CLASS, "PATH_NOT_FOUND"),
            ("recoverable_exceptions", TYPE_NAME, "mypackage.FlakyLookup"),
        ):
            values = getattr(self, name)
            if isinstance(values, str) or not isinstance(values, tuple):
                raise ValueError(f"{name}={values!r}: give a tuple of names, e.g. ({example!r},)")
            for value in values:
                if not isinstance(value, str) or not pattern.match(value):
                    raise ValueError(f"{name}: {value!r} is not a valid name; e.g. {example!r}")

    def extended(self, other: FailureRules) -> FailureRules:
        """These rules with ``other``'s names added (a stage's on top of its pipeline's)."""
        names = [f.name for f in fields(FailureRules)]
        return FailureRules(**{n: _union(getattr(self, n), getattr(other, n)) for n in names})


@dataclass(frozen=True)
class FailureLabels:
    """The classification of one failure: shown in the UI, ``history``, the journal and the metrics."""

    recoverable: bool
    kind: FailureKind
    error_class: str | None = None
    reason: str = ""  # why it is (not) recoverable, when a rule decided

    def describe(self) -> str:
        """``user code, UNRESOLVED_COLUMN.WITH_SUGGESTION`` (the labels, for a sentence)."""
        return ", ".join(filter(None, (self.kind.value, self.error_class)))

    def to_dict(self) -> dict[str, object]:
        return {
            "recoverable": self.recoverable,
            "kind": self.kind.value,
            "error_class": self.error_class,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> FailureLabels:
        """Stored labels back; ValueError when they are not labels this release writes."""
        recoverable, kind, error_class, reason = (
            data.get("recoverable"),
            data.get("kind"),
            data.get("error_class"),
            data.get("reason", ""),
        )
        if not isinstance(recoverable, bool) or not isinstance(reason, str):
            raise ValueError(f"failure labels need recoverable (true/false) and a reason text, got {data!r}")
        if error_class is not None and (
            not isinstance(error_class, str) or not ERROR_CLASS.match(error_class)
        ):
            raise ValueError(f"failure labels: {error_class!r} is not a Spark error class")
        try:
            return cls(recoverable, FailureKind(kind), error_class, reason)
        except ValueError:
            kinds = ", ".join(k.value for k in FailureKind)
            raise ValueError(f"failure labels: kind {kind!r} is not one of {kinds}") from None


def classify(facts: FailureFacts, rules: FailureRules = FailureRules()) -> FailureLabels:
    """The labels of a failure under ``rules`` (user verdict first, then lost data, then the rules)."""
    kind = _kind(facts)
    if facts.verdict is not None:
        said = "recoverable" if facts.verdict else "not recoverable"
        return FailureLabels(
            facts.verdict,
            kind,
            facts.error_class,
            facts.verdict_reason or f"the pipeline's classifier: {said}",
        )
    if kind in (FailureKind.LOST_DATA, FailureKind.KILLED, FailureKind.INJECTED):
        return FailureLabels(True, kind, None if kind is FailureKind.INJECTED else facts.error_class)
    if facts.exception_types & set(rules.recoverable_exceptions):
        return FailureLabels(True, kind, facts.error_class)
    if facts.error_class and _matches(facts.error_class, rules.recoverable_error_classes):
        return FailureLabels(True, kind, facts.error_class)
    if facts.error_class and _matches(facts.error_class, rules.non_recoverable_error_classes):
        reason = f"Spark error class {facts.error_class} is listed as not recoverable"
        return FailureLabels(False, FailureKind.USER_CODE, facts.error_class, reason)
    if facts.sql_state and _matches(facts.sql_state, rules.non_recoverable_sql_states, separator=""):
        what = "an analysis error" if facts.sql_state.startswith("42") else "listed as not recoverable"
        reason = f"Spark {facts.error_class or 'error'} (SQLSTATE {facts.sql_state}) is {what}"
        return FailureLabels(False, FailureKind.USER_CODE, facts.error_class, reason)
    listed = sorted(facts.exception_types & set(rules.non_recoverable_exceptions))
    if kind in (FailureKind.INFRASTRUCTURE, FailureKind.TIMEOUT):  # a restart may heal what caused it
        listed = [name for name in listed if name not in PROGRAMMING_ERRORS]
    if listed:
        name = listed[0].rsplit(".", 1)[-1]
        reason = (
            f"{name} is a programming error: every try would fail the same way (fix the code, or list it "
            "in failure_rules recoverable_exceptions)"
            if listed[0] in PROGRAMMING_ERRORS
            else f"{name} is not recoverable"
        )
        return FailureLabels(False, FailureKind.USER_CODE, facts.error_class, reason)
    return FailureLabels(True, kind, facts.error_class)


def _kind(facts: FailureFacts) -> FailureKind:
    types = facts.exception_types
    if facts.killed:
        return FailureKind.KILLED
    if types & set(_INJECTED_EXCEPTIONS):
        return FailureKind.INJECTED
    if facts.lost_data or types & set(_LOST_DATA_EXCEPTIONS):
        return FailureKind.LOST_DATA
    if types & set(_TIMEOUT_EXCEPTIONS):
        return FailureKind.TIMEOUT
    if facts.sql_state and facts.sql_state[:2] in _INFRASTRUCTURE_SQL_STATES:
        return FailureKind.INFRASTRUCTURE
    if not facts.sql_state and types & set(_INFRASTRUCTURE_EXCEPTIONS):
        return FailureKind.INFRASTRUCTURE
    return FailureKind.USER_CODE


def _matches(name: str, prefixes: Iterable[str], *, separator: str = ".") -> bool:
    return any(
        name == p or (name.startswith(p) and (not separator or name[len(p)] == separator)) for p in prefixes
    )


def _union(
    first: tuple[str | type[BaseException], ...], second: tuple[str | type[BaseException], ...]
) -> tuple[str, ...]:
    return tuple(dict.fromkeys(map(exception_name, (*first, *second))))


KILLED = FailureLabels(True, FailureKind.KILLED)
__all__ = [
    "KILLED",
    "PROGRAMMING_ERRORS",
    "FailureFacts",
    "FailureKind",
    "FailureLabels",
    "FailureRules",
    "classify",
    "exception_name",
]
