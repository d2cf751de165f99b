"""The task-level view of a StageGraph with integer ids, built once and shared by regions and strategies.

Tasks and partitions are numbered stage by stage, so every exchange group maps to two integer ranges
and nothing here grows with the number of task-to-task edges of an all-to-all exchange.
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import StageGraph, subtask_ids


@dataclass(frozen=True)
class Link:
    """Every partition in ``partitions`` feeds every task in ``consumers`` (both integer ranges)."""

    partitions: range
    consumers: range
    blocking: bool


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

        self.links: list[Link] = []
        for consumption in graph.consumptions:
            blocking = graph.results[consumption.result].result_type.is_reconsumable
            p0 = result_offset[consumption.result]
            c0 = stage_offset[consumption.stage]
            for group in graph.exchange_groups(consumption):
                self.links.append(
                    Link(
                        range(p0 + group.partitions.start, p0 + group.partitions.stop),
                        range(c0 + group.consumers.start, c0 + group.consumers.stop),
                        blocking,
                    )
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
