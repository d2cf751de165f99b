"""The task-level view of a StageGraph with integer ids, built once and shared by regions and strategies.

Tasks and partitions are numbered stage by stage, so every exchange group maps to two integer ranges
and nothing here grows with the number of task-to-task edges of an all-to-all exchange.
"""

from __future__ import annotations

from typing import NamedTuple

from .graph import DistributionPattern, StageGraph, pointwise_ranges, subtask_ids


class Link(NamedTuple):
    """Every partition in ``partitions`` feeds every task in ``consumers`` (both integer ranges).

    A NamedTuple rather than a dataclass: graphs have up to one per task, and tuples of ranges are
    cheap to build and untracked by the garbage collector.
    """

    partitions: range
    consumers: range
    blocking: bool
    exchange: int  # index into Topology.exchanges: the consumption this link belongs to


class Topology:
    def __init__(self, graph: StageGraph) -> None:
        self.task_names: list[str] = []
        stage_offset: dict[str, int] = {}
        for stage in graph.stages.values():
            stage_offset[stage.name] = len(self.task_names)
            self.task_names.extend(subtask_ids(stage.name, stage.parallelism))
        self.task_index: dict[str, int] = {name: i for i, name in enumerate(self.task_names)}

        self.partition_names: list[str] = []
        self.partition_producer: list[int] = []
        self.partition_blocking: list[bool] = []
        result_offset: dict[str, int] = {}
        for result in graph.results.values():
            parallelism = graph.stages[result.producer].parallelism
            result_offset[result.name] = len(self.partition_names)
            self.partition_names.extend(subtask_ids(result.name, parallelism))
            first = stage_offset[result.producer]
            self.partition_producer.extend(range(first, first + parallelism))
            self.partition_blocking.extend([result.result_type.is_reconsumable] * parallelism)
        self.partition_index: dict[str, int] = {name: i for i, name in enumerate(self.partition_names)}

        # One exchange per consumption: (producer stage, consumer stage, blocking), stages numbered
        # in graph order; each consumption becomes one or more links.
        stage_number = {name: i for i, name in enumerate(graph.stages)}
        self.exchanges: list[tuple[int, int, bool]] = []
        self.links: list[Link] = []
        for exchange, consumption in enumerate(graph.consumptions):
            result = graph.results[consumption.result]
            blocking = result.result_type.is_reconsumable
            self.exchanges.append((stage_number[result.producer], stage_number[consumption.stage], blocking))
            p0 = result_offset[consumption.result]
            c0 = stage_offset[consumption.stage]
            producers = graph.stages[result.producer].parallelism
            consumers = graph.stages[consumption.stage].parallelism
            if consumption.pattern is DistributionPattern.ALL_TO_ALL:  # as graph.exchange_groups
                partitions, tasks = range(p0, p0 + producers), range(c0, c0 + consumers)
                self.links.append(Link(partitions, tasks, blocking, exchange))
            else:
                self.links.extend(
                    Link(partitions, tasks, blocking, exchange)
                    for partitions, tasks in pointwise_ranges(producers, consumers, p0, c0)
                )

    def task(self, task_id: str) -> int:
        try:
            return self.task_index[task_id]
        except KeyError:
            raise ValueError(
                f"unknown task {task_id!r}; task ids are stage names, with [i] for map index i of a "
                f"stage with parallelism > 1 (e.g. {self.task_names[:3]})"
            ) from None

    def partition(self, partition_id: str) -> int:
        try:
            return self.partition_index[partition_id]
        except KeyError:
            raise ValueError(
                f"unknown partition {partition_id!r}; partition ids are result names, with [i] for the "
                f"partition of producer map index i (e.g. {self.partition_names[:3]})"
            ) from None
