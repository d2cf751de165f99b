"""Every assumption this provider makes about Airflow internals (not public API), in one place.

The pipeline builder needs a few things Airflow 3.3 has no public API for: the DAG being defined, the
arguments an operator was given, where a mapped operator keeps its arguments, moving a task into a
TaskGroup after it was created, asking for DAG callbacks after the DAG was built, and how many tries a
retry policy can grant. Each function below names what it relies on; ``tests/unit/
test_compat.py`` has one test per assumption, so an Airflow upgrade that breaks one fails there, with
its name, rather than somewhere in a pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sized
from typing import Protocol, TypeAlias, TypeGuard

from airflow.sdk import DAG, BaseOperator, TaskGroup
from airflow.sdk.definitions._internal.contextmanager import DagContext
from airflow.sdk.definitions.mappedoperator import MappedOperator

Task: TypeAlias = BaseOperator | MappedOperator

# A RetryPolicy's RETRY still goes through Airflow's retry-count check (task_runner's
# _finalize_task_failure): it cannot grant more tries than ``retries``. Stages get a budget no restart
# strategy reaches, and the strategy decides when to stop. Proven live by the ``policy_capped`` task of
# tests/e2e/test_airflow_mechanics.py::test_retry_policy_delay_and_fail (retries=1, policy always
# RETRY: the task fails at try 2).
RETRY_BUDGET = 10_000


def current_dag() -> DAG | None:
    """The DAG whose ``with`` block is open (None outside one): ``DagContext``, private in the SDK."""
    return DagContext.get_current()


def is_mapped(task: object) -> TypeGuard[MappedOperator]:
    """A ``.partial().expand()`` task (``MappedOperator``, not exported by ``airflow.sdk``)."""
    return isinstance(task, MappedOperator)


def mapped_operator_class(task: MappedOperator) -> type:
    """The operator class a mapped task expands to."""
    return task.operator_class


def map_length_at_parse(task: MappedOperator) -> int:
    """How many map indexes a mapped task has, from its literal ``expand()`` arguments (TypeError when
    they are not literal, e.g. an XCom result). ``expand_input.value`` is the SDK's internal form."""
    value = task.expand_input.value
    lists = list(value.values()) if isinstance(value, Mapping) else [value]
    lengths = [_literal_length(v) for v in lists]
    count = 1
    for n in lengths:
        count *= n
    return max(1, count) if lengths else 1


def _literal_length(values: object) -> int:
    if not isinstance(values, Sized):
        raise TypeError(f"object of type {type(values).__name__} has no len()")
    return len(values)


def given_arguments(task: Task) -> Mapping[str, object]:
    """The arguments a task was created with, default_args merged in.

    A plain operator keeps them in the name-mangled ``__init_kwargs`` of BaseOperator; a mapped one
    keeps only ``partial_kwargs`` (where an argument equal to its default cannot be told from none).
    """
    if is_mapped(task):
        return task.partial_kwargs
    return getattr(task, "_BaseOperator__init_kwargs", {})


def set_arguments(task: Task, **arguments: object) -> None:
    """Set operator arguments after creation; a mapped task keeps them in ``partial_kwargs``, which
    every expanded task instance is built from."""
    if is_mapped(task):
        task.partial_kwargs.update(arguments)
    else:
        for name, value in arguments.items():
            setattr(task, name, value)


def add_outlets(task: Task, outlets: Iterable[object]) -> None:
    """Append outlets (Assets) to a task, mapped or not."""
    if is_mapped(task):
        task.partial_kwargs["outlets"] = [*task.partial_kwargs.get("outlets", []), *outlets]
    else:
        task.outlets = [*task.outlets, *outlets]


def move_into_group(task: Task, group: TaskGroup) -> None:
    """Move a task from the DAG's root TaskGroup into ``group``. ``TaskGroup.add`` refuses a task that
    already has a group, and the root lists its children in a plain dict (``children``)."""
    if task.dag is not None:
        task.dag.task_group.children.pop(task.task_id, None)
    task.task_group = None
    group.add(task)


def request_dag_callbacks(dag: DAG) -> None:
    """Make the scheduler ask the DAG processor to run this DAG's success and failure callbacks.
    ``DAG.__init__`` sets ``has_on_*_callback`` from its arguments only, and the serialized DAG carries
    them; callbacks added after the DAG was created are otherwise never run."""
    dag.has_on_success_callback = True
    dag.has_on_failure_callback = True


def redact_secrets(text: str) -> str:
    """``text`` with every secret Airflow's secrets maskers know replaced by ``***``: the task SDK's
    (connections a worker has read) and, where it exists, the core one (the API server's, the DAG
    processor's). Both live in private ``_shared`` packages."""
    from airflow.sdk._shared.secrets_masker import redact

    masked = str(redact(text))
    try:
        from airflow._shared.secrets_masker import redact as redact_core
    except ImportError:  # a worker with the task SDK only
        return masked
    return str(redact_core(masked))


class _RunningTask(Protocol):
    task_id: str
    dag_id: str


def map_indexes_in_run(ti: _RunningTask, run_id: str) -> int:
    """How many map indexes Airflow expanded a running task's mapped task to in ``run_id`` (its removed
    ones, left by an earlier expansion of the same run, not counted). ``RuntimeTaskInstance.
    get_task_states`` asks the API server; its keys are ``<task>_<index>`` (``<task>`` unexpanded)."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    states = RuntimeTaskInstance.get_task_states(dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[run_id])
    prefix = f"{ti.task_id}_"
    return sum(
        1
        for key, state in states.get(run_id, {}).items()
        if key.startswith(prefix) and key[len(prefix) :].isdigit() and state != "removed"
    )


def expand_references(task: Task) -> list[str]:
    """The task ids a mapped task's ``expand`` input pulls from (``ExpandInput.iter_references``)."""
    if not is_mapped(task):
        return []
    return [operator.task_id for operator, _ in task.expand_input.iter_references()]


def unique_task_id(task_id: str) -> str:
    """``task_id``, or ``task_id__<n>`` when the DAG being defined has it (``@task``'s numbering)."""
    from airflow.sdk.bases.decorator import get_unique_task_id

    return get_unique_task_id(task_id)
