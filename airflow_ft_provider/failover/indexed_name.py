"""The one id form of a stage's task and a result's partition: ``name``, or ``name[i]`` for index i.

Flink names a subtask by its vertex and subtask index, and a result partition by its result and
partition number; here both are strings that Airflow users see (task ids with a map index, partition
ids in manifests and XComs). Unmapped is index -1, as Airflow's map index of a task that is not
mapped; a stage of parallelism 1 is unmapped. Every place that builds or reads such an id goes
through this type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNMAPPED = -1  # Airflow's map index of an unmapped task

# The name part is checked by its owner (stage and result names by the graph, DAG ids by the store).
_FORM = re.compile(r"([^\[\]]+)(?:\[([0-9]+)\])?\Z")


@dataclass(frozen=True, order=True)
class IndexedName:
    """``IndexedName("score", 3)`` is ``score[3]``; ``IndexedName("report")`` is ``report``."""

    name: str
    index: int = UNMAPPED

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _FORM.match(self.name) or "[" in self.name:
            raise ValueError(f"invalid name {self.name!r}: must be non-empty, without brackets")
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < UNMAPPED:
            raise ValueError(
                f"invalid index {self.index!r} of {self.name!r}: -1 (unmapped) or an integer ≥ 0"
            )

    @classmethod
    def of(cls, name: str, index: int, parallelism: int) -> IndexedName:
        """Index ``index`` of something with ``parallelism`` indexes (1: unmapped, whatever the index)."""
        return cls(name) if parallelism == 1 else cls(name, index)

    @classmethod
    def all(cls, name: str, parallelism: int) -> list[IndexedName]:
        """Every index of something with ``parallelism`` indexes, in order."""
        return [cls(name)] if parallelism == 1 else [cls(name, i) for i in range(parallelism)]

    @classmethod
    def from_airflow(cls, task_id: str, map_index: int | None) -> IndexedName:
        """A task instance's id from Airflow's (task id, map index); None or negative: unmapped."""
        return cls(task_id, UNMAPPED if map_index is None or map_index < 0 else map_index)

    @classmethod
    def parse(cls, text: str) -> IndexedName:
        """``name`` or ``name[i]``; ValueError naming the expected form otherwise."""
        match = _FORM.match(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(
                f"invalid id {text!r}: give a name, or name[i] for index i (e.g. score or score[3])"
            )
        return cls(match.group(1), UNMAPPED if match.group(2) is None else int(match.group(2)))

    @property
    def mapped(self) -> bool:
        return self.index != UNMAPPED

    def __str__(self) -> str:
        return f"{self.name}[{self.index}]" if self.mapped else self.name


def indexed(name: str, index: int | None, parallelism: int) -> str:
    """``str(IndexedName.of(name, index, parallelism))`` without the checks (hot paths of the core)."""
    return name if parallelism == 1 else f"{name}[{index}]"


def all_indexed(name: str, parallelism: int) -> list[str]:
    """Every id string of something with ``parallelism`` indexes (the core's graphs have 100k of them)."""
    return [name] if parallelism == 1 else [f"{name}[{i}]" for i in range(parallelism)]
