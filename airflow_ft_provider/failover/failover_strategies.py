"""Failover strategies answer *which tasks* restart after a task failure (Flink's ``full`` and ``region``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from .graph import StageGraph
from .regions import RegionIndex
from .topology import Topology

FAILOVER_STRATEGY_KEY = "jobmanager.execution.failover-strategy"


class FailoverStrategy(Protocol):
    name: str

    def tasks_to_restart(self, failed_task: str, unavailable: Iterable[str] = ()) -> set[str]:
        """Task ids to run again after ``failed_task`` failed; ``unavailable`` names lost partitions."""


class RestartAllFailoverStrategy:
    """Restart every task of the run (``full``)."""

    name = "full"

    def __init__(self, graph: StageGraph) -> None:
        self._topology = Topology(graph)

    def tasks_to_restart(self, failed_task: str, unavailable: Iterable[str] = ()) -> set[str]:
        self._topology.task(failed_task)
        for partition in unavailable:
            self._topology.partition(partition)
        return set(self._topology.task_names)

    def __repr__(self) -> str:
        return "RestartAllFailoverStrategy()"


class RestartPipelinedRegionFailoverStrategy:
    """Restart the smallest set of regions that recovers the run (``region``, the default).

    Flink's three rules, applied until nothing changes:
    1. the failed task's region restarts;
    2. a restarting region that consumes an unavailable partition restarts that partition's producer
       region (backtracking; pipelined partitions are never available again);
    3. every consumer region of a restarting region restarts, because a re-run producer need not be
       deterministic and its old consumers may have read different data.
    """

    name = "region"

    def __init__(self, graph: StageGraph) -> None:
        topology = self._topology = Topology(graph)
        index = self._index = RegionIndex(topology)
        region_of = index.region_of
        producer = topology.partition_producer
        regions = len(index.members)
        # Per region: the links it reads from (backtracking) and the links it writes to (forward).
        self._consumed_links: list[list[int]] = [[] for _ in range(regions)]
        self._produced_links: list[list[int]] = [[] for _ in range(regions)]
        self._link_consumer_regions: list[list[int]] = []
        for link_id, link in enumerate(topology.links):
            consumer_regions = list(dict.fromkeys(region_of[c] for c in link.consumers))
            self._link_consumer_regions.append(consumer_regions)
            for region in consumer_regions:
                self._consumed_links[region].append(link_id)
            for region in dict.fromkeys(region_of[producer[p]] for p in link.partitions):
                self._produced_links[region].append(link_id)
        self._region_tasks = index.task_sets(topology)

    @property
    def regions(self) -> list[frozenset[str]]:
        return list(self._region_tasks)

    def region_of(self, task_id: str) -> frozenset[str]:
        return self._region_tasks[self._index.region_of[self._topology.task(task_id)]]

    def regions_to_restart(self, failed_task: str, unavailable: Iterable[str] = ()) -> list[frozenset[str]]:
        """The restarting regions, the failed task's first, then in the order the rules reach them."""
        return [self._region_tasks[r] for r in self._restart_regions(failed_task, unavailable)]

    def tasks_to_restart(self, failed_task: str, unavailable: Iterable[str] = ()) -> set[str]:
        names = self._topology.task_names
        members = self._index.members
        return {names[t] for r in self._restart_regions(failed_task, unavailable) for t in members[r]}

    def _restart_regions(self, failed_task: str, unavailable: Iterable[str]) -> list[int]:
        topology = self._topology
        lost = {topology.partition(p) for p in unavailable}
        blocking = topology.partition_blocking
        producer = topology.partition_producer
        region_of = self._index.region_of
        links = topology.links

        start = region_of[topology.task(failed_task)]
        order = [start]
        seen = {start}
        seen_consumed: set[int] = set()
        seen_produced: set[int] = set()
        for region in order:  # grows while iterating: a breadth-first walk
            for link_id in self._consumed_links[region]:
                if link_id in seen_consumed:
                    continue
                seen_consumed.add(link_id)
                for p in links[link_id].partitions:
                    if p in lost or not blocking[p]:
                        upstream = region_of[producer[p]]
                        if upstream not in seen:
                            seen.add(upstream)
                            order.append(upstream)
            for link_id in self._produced_links[region]:
                if link_id in seen_produced:
                    continue
                seen_produced.add(link_id)
                for downstream in self._link_consumer_regions[link_id]:
                    if downstream not in seen:
                        seen.add(downstream)
                        order.append(downstream)
        return order

    def __repr__(self) -> str:
        return f"RestartPipelinedRegionFailoverStrategy(regions={len(self._region_tasks)})"


_FAILOVER_STRATEGIES = {"region": RestartPipelinedRegionFailoverStrategy, "full": RestartAllFailoverStrategy}


def load_failover_strategy(config: Mapping[str, object], graph: StageGraph) -> FailoverStrategy:
    """The strategy named by ``jobmanager.execution.failover-strategy`` (default ``region``)."""
    value = config.get(FAILOVER_STRATEGY_KEY, "region")
    name = value.strip().lower() if isinstance(value, str) else value
    if name not in _FAILOVER_STRATEGIES:
        raise ValueError(
            f"{FAILOVER_STRATEGY_KEY} must be 'region' or 'full', got {value!r}; use 'region' to restart "
            "only the affected regions (default) or 'full' to restart the whole run"
        )
    return _FAILOVER_STRATEGIES[name](graph)
