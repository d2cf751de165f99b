"""The task-instance API region failover needs, typed: list a run's instances, clear some, read a try.

Two implementations: ``AirflowApiHook`` (a worker clears through the REST API with the ``airflow_api``
connection) and ``plugins.clear.CallerClears`` (the failover page clears in the API server as the user
who pressed the button). Tests script it.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TaskInstanceRow:
    """One task instance of a run (one map index), as the API lists it or a clear returns it."""

    task_id: str
    map_index: int  # -1: not mapped
    try_number: int
    state: str | None = None
    id: str | None = None  # a clear (and a new try) gives the instance a new id

    @property
    def key(self) -> tuple[str, int]:
        return (self.task_id, self.map_index)

    @classmethod
    def from_api(cls, item: Mapping[str, object]) -> TaskInstanceRow:
        """A ``TaskInstanceResponse`` of Airflow's REST API, checked field by field."""
        task_id, map_index = item.get("task_id"), item.get("map_index", -1)
        try_number, state, ident = item.get("try_number", 0), item.get("state"), item.get("id")
        if (
            not isinstance(task_id, str)
            or not _int(map_index)
            or not _int(try_number)
            or not isinstance(state, (str, type(None)))
            or not isinstance(ident, (str, type(None)))
        ):
            raise ValueError(f"unexpected task instance in the REST API's answer: {reprlib.repr(dict(item))}")
        assert isinstance(map_index, int) and isinstance(try_number, int)
        return cls(task_id, map_index, try_number, state, ident)


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class TaskInstanceApi(Protocol):
    """What region failover asks of Airflow about one run's task instances."""

    def instances(self, dag_id: str, run_id: str) -> list[TaskInstanceRow]:
        """Every task instance of the run, one per map index."""

    def clear_instances(
        self, dag_id: str, run_id: str, keys: Sequence[tuple[str, int]]
    ) -> list[TaskInstanceRow]:
        """Clear exactly these (task id, map index) instances, whatever their state, once; the
        instances the clear touched."""

    def try_state(
        self, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int
    ) -> str | None:
        """The state one past try of a task instance ended in; None when it never started (Airflow
        keeps no record of a try its worker could not start)."""
