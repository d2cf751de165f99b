"""A pipeline as stages and the result partitions they exchange (Flink's job graph, at stage level).

A stage with parallelism n runs as n tasks, ``name[0]`` … ``name[n-1]`` (the map indexes of a mapped
Airflow task); with parallelism 1 its single task is just ``name``. Each producer task makes one
partition of every result of its stage, named the same way after the result.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .indexed_name import all_indexed, indexed

# Patterns end in \Z, not $: "$" also matches before a final newline ("raw\n").
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
MAX_NAME_LENGTH = 250  # Airflow's limit for a task id


class ResultPartitionType(enum.Enum):
    """How a result is exchanged; only blocking partitions survive a failure of their producer's region."""

    BLOCKING = "blocking"
    PIPELINED = "pipelined"

    @property
    def is_reconsumable(self) -> bool:
        return self is ResultPartitionType.BLOCKING


class DistributionPattern(enum.Enum):
    """Which producer partitions a consumer task reads."""

    ALL_TO_ALL = "all_to_all"
    POINTWISE = "pointwise"


@dataclass(frozen=True)
class Stage:
    name: str
    parallelism: int

    @property
    def task_ids(self) -> list[str]:
        return subtask_ids(self.name, self.parallelism)


@dataclass(frozen=True)
class Result:
    name: str
    producer: str
    result_type: ResultPartitionType


@dataclass(frozen=True)
class Consumption:
    stage: str
    result: str
    pattern: DistributionPattern


@dataclass(frozen=True)
class ExchangeGroup:
    """Every partition index in ``partitions`` is read by every consumer index in ``consumers``.

    Flink's consumed-partition group: an all-to-all exchange is one group, however wide, which keeps
    region computation linear in the number of tasks rather than in the number of task-to-task edges.
    """

    result: str
    partitions: range
    consumers: range


subtask_id = indexed  # a stage's task i: "stage" or "stage[i]" (indexed_name.py owns the form)
subtask_ids = all_indexed


def pointwise_ranges(
    producers: int, consumers: int, first_partition: int = 0, first_consumer: int = 0
) -> list[tuple[range, range]]:
    """Flink's pointwise rule: equal sizes pair i with i; otherwise split the larger side evenly.

    Returns (partition indexes, consumer indexes) pairs, shifted by ``first_partition`` and
    ``first_consumer`` (the task-level topology numbers all partitions and tasks of a graph).
    """
    p0, c0 = first_partition, first_consumer
    if producers == consumers:
        return [(range(p0 + i, p0 + i + 1), range(c0 + i, c0 + i + 1)) for i in range(producers)]
    if producers > consumers:
        return [
            (
                range(p0 + i * producers // consumers, p0 + (i + 1) * producers // consumers),
                range(c0 + i, c0 + i + 1),
            )
            for i in range(consumers)
        ]
    return [
        (
            range(p0 + p, p0 + p + 1),
            range(
                c0 + (p * consumers + producers - 1) // producers,
                c0 + ((p + 1) * consumers + producers - 1) // producers,
            ),
        )
        for p in range(producers)
    ]


def pointwise_groups(result: str, producers: int, consumers: int) -> list[ExchangeGroup]:
    """Flink's pointwise rule as exchange groups (see ``pointwise_ranges``)."""
    pairs = pointwise_ranges(producers, consumers)
    return [ExchangeGroup(result, partitions, tasks) for partitions, tasks in pairs]


def _check_name(kind: str, name: object) -> str:
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"invalid {kind} name {name!r}: use 1-{MAX_NAME_LENGTH} letters, digits, '_', '.' or '-', "
            "starting with a letter, digit or '_' (map indexes like [0] are added automatically)"
        )
    return name


class StageGraph:
    """Stages, their named results, and who consumes what. Mutable while being built."""

    def __init__(self) -> None:
        self._stages: dict[str, Stage] = {}
        self._results: dict[str, Result] = {}
        self._consumptions: list[Consumption] = []
        self._consumed: set[tuple[str, str]] = set()

    # -- building ---------------------------------------------------------------------------------
    def add_stage(self, name: str, parallelism: int = 1) -> Stage:
        _check_name("stage", name)
        if name in self._stages:
            raise ValueError(f"duplicate stage name {name!r}: every stage needs a unique name")
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(
                f"stage {name!r}: parallelism must be an integer ≥ 1, got {parallelism!r}; "
                "use 1 for a plain task or the number of map indexes of a mapped task"
            )
        stage = Stage(name, parallelism)
        self._stages[name] = stage
        return stage

    def add_result(self, name: str, producer: str, result_type: ResultPartitionType) -> Result:
        _check_name("result", name)
        if name in self._results:
            raise ValueError(
                f"duplicate result name {name!r}: already produced by stage "
                f"{self._results[name].producer!r}; give each output its own name"
            )
        self._require_stage(producer, f"producer of result {name!r}")
        if not isinstance(result_type, ResultPartitionType):
            raise ValueError(
                f"result {name!r}: result_type must be ResultPartitionType.BLOCKING or .PIPELINED, "
                f"got {result_type!r}"
            )
        result = Result(name, producer, result_type)
        self._results[name] = result
        return result

    def consume(
        self, stage: str, result: str, pattern: DistributionPattern = DistributionPattern.ALL_TO_ALL
    ) -> Consumption:
        self._require_stage(stage, f"consumer of result {result!r}")
        if result not in self._results:
            raise ValueError(
                f"stage {stage!r} consumes unknown result {result!r}; known results: "
                f"{sorted(self._results) or 'none'} (add it with add_result first)"
            )
        if not isinstance(pattern, DistributionPattern):
            raise ValueError(
                f"stage {stage!r} consuming {result!r}: pattern must be DistributionPattern.ALL_TO_ALL "
                f"or .POINTWISE, got {pattern!r}"
            )
        if self._results[result].producer == stage:
            raise ValueError(
                f"stage {stage!r} cannot consume its own result {result!r} (self-loop); "
                "split the stage in two or read a result of an upstream stage"
            )
        if (stage, result) in self._consumed:
            raise ValueError(f"stage {stage!r} already consumes result {result!r}; declare it once")
        consumption = Consumption(stage, result, pattern)
        self._consumptions.append(consumption)
        self._consumed.add((stage, result))
        return consumption

    def _require_stage(self, name: str, role: str) -> None:
        if name not in self._stages:
            raise ValueError(
                f"unknown stage {name!r} as {role}; known stages: {sorted(self._stages) or 'none'} "
                "(add it with add_stage first)"
            )

    # -- reading ----------------------------------------------------------------------------------
    @property
    def stages(self) -> Mapping[str, Stage]:
        return self._stages

    @property
    def results(self) -> Mapping[str, Result]:
        return self._results

    @property
    def consumptions(self) -> tuple[Consumption, ...]:
        return tuple(self._consumptions)

    def task_ids(self) -> list[str]:
        return [task for stage in self._stages.values() for task in stage.task_ids]

    def partition_ids(self, result: str | None = None) -> list[str]:
        results = [self._results[result]] if result is not None else self._results.values()
        return [pid for r in results for pid in subtask_ids(r.name, self._stages[r.producer].parallelism)]

    def exchange_groups(self, consumption: Consumption) -> list[ExchangeGroup]:
        """The task-level wiring of one consumption, as groups (see ExchangeGroup)."""
        producers = self._stages[self._results[consumption.result].producer].parallelism
        consumers = self._stages[consumption.stage].parallelism
        if consumption.pattern is DistributionPattern.ALL_TO_ALL:
            return [ExchangeGroup(consumption.result, range(producers), range(consumers))]
        return pointwise_groups(consumption.result, producers, consumers)

    def upstream_stages(self, stage: str) -> set[str]:
        return {self._results[c.result].producer for c in self._consumptions if c.stage == stage}

    def find_cycle(self) -> list[str] | None:
        """A cycle of stages (first stage repeated at the end), or None when the graph is acyclic."""
        downstream: dict[str, list[str]] = {name: [] for name in self._stages}
        for c in self._consumptions:
            downstream[self._results[c.result].producer].append(c.stage)
        state: dict[str, int] = {}  # 1 = on the current path, 2 = done
        for root in self._stages:
            if root in state:
                continue
            path: list[str] = [root]
            iters: list[Iterator[str]] = [iter(downstream[root])]
            state[root] = 1
            while iters:
                nxt = next(iters[-1], None)
                if nxt is None:
                    state[path.pop()] = 2
                    iters.pop()
                elif state.get(nxt) == 1:
                    return path[path.index(nxt) :] + [nxt]
                elif nxt not in state:
                    state[nxt] = 1
                    path.append(nxt)
                    iters.append(iter(downstream[nxt]))
        return None

    def __repr__(self) -> str:
        return (
            f"StageGraph(stages={len(self._stages)}, results={len(self._results)}, "
            f"consumptions={len(self._consumptions)})"
        )
