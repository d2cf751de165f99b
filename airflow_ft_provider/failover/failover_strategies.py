"""Failover strategies answer *which tasks* restart after a task failure (Flink's ``full`` and ``region``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from itertools import chain
from typing import Protocol

from .graph import StageGraph
from .regions import RegionIndex
from .topology import Topology

FAILOVER_STRATEGY_KEY = "jobmanager.execution.failover-strategy"


class FailoverStrategy(Protocol):
    name: str

    def region_of(self, task_id: str) -> frozenset[str]:
        """The tasks that restart with ``task_id`` as one unit (``full``: every task of the run)."""

    def regions_to_restart(self, failed_task: str, unavailable: Iterable[str] = ()) -> list[frozenset[str]]:
        """The regions to run again after ``failed_task`` failed, the failed task's first."""

    def tasks_to_restart(self, failed_task: str, unavailable: Iterable[str] = ()) -> set[str]:
        """Task ids to run again after ``failed_task`` failed; ``unavailable`` names lost partitions."""


class RestartAllFailoverStrategy:
    """Restart every task of the run (``full``)."""

    name = "full"

    def __init__(self, graph: StageGraph) -> None:
        self._topology = Topology(graph)

    @cached_property
    def _all(self) -> frozenset[str]:
        return frozenset(self._topology.task_names)

    def region_of(self, task_id: str) -> frozenset[str]:
        self._topology.task(task_id)
        return self._all

    def regions_to_restart(self, failed_task: str, unavailable: Iterable[str] = ()) -> list[frozenset[str]]:
        self._topology.task(failed_task)
        for partition in unavailable:
            self._topology.partition(partition)
        return [self._all]

    def tasks_to_restart(self, failed_task: str, unavailable: Iterable[str] = ()) -> set[str]:
        return set(self.regions_to_restart(failed_task, unavailable)[0])

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
        region_at = index.region_of.__getitem__
        producer_of = topology.partition_producer.__getitem__
        regions = self._region_count = len(index.members)
        # Only blocking links matter below: a pipelined link's producers and consumers all belong to
        # one region (regions.py, step 1), so rules 2 and 3 never leave a region through one.
        #
        # Rule 3 as a graph of nodes: regions 0..regions-1, then one hub per wide blocking link (several
        # producer regions and several consumer regions), so an all-to-all exchange costs
        # producers + consumers entries, not producers x consumers.
        successors: list[list[int]] = [[] for _ in range(regions)]
        hub_targets: list[list[int]] = []
        # Rule 2: the blocking links each partition feeds, and every blocking link's consumer regions.
        partition_links: list[tuple[int, ...]] = [()] * len(topology.partition_names)
        self._link_targets: dict[int, list[int]] = {}
        for link_id, (partitions, consumers, blocking, _) in enumerate(topology.links):
            if not blocking:
                continue
            sources = list(dict.fromkeys(map(region_at, map(producer_of, partitions))))
            targets = list(dict.fromkeys(map(region_at, consumers)))
            self._link_targets[link_id] = targets
            for p in partitions:
                partition_links[p] += (link_id,)
            if len(sources) == 1:
                successors[sources[0]].extend(targets)
            elif len(targets) == 1:
                for source in sources:
                    successors[source].append(targets[0])
            else:
                for source in sources:
                    successors[source].append(regions + len(hub_targets))
                hub_targets.append(targets)
        self._partition_links = partition_links
        self._successors = [list(dict.fromkeys(nodes)) if len(nodes) > 1 else nodes for nodes in successors]
        self._hub_targets = hub_targets
        self._hub_target_sets = [frozenset(targets) for targets in hub_targets]
        # Reaching a hub reaches all its targets at once; their successors, merged, are visited next.
        self._hub_next = [
            list(dict.fromkeys(chain.from_iterable(map(self._successors.__getitem__, targets))))
            for targets in hub_targets
        ]
        names = topology.task_names.__getitem__
        self._region_names = [tuple(map(names, members)) for members in index.members]
        self._hub_names = [
            tuple(chain.from_iterable(map(self._region_names.__getitem__, targets)))
            for targets in hub_targets
        ]

    @cached_property
    def _region_tasks(self) -> list[frozenset[str]]:
        """Task ids per region; built on first use, as rule evaluation needs only the names."""
        return [frozenset(names) for names in self._region_names]

    @property
    def regions(self) -> list[frozenset[str]]:
        return list(self._region_tasks)

    def region_of(self, task_id: str) -> frozenset[str]:
        return self._region_tasks[self._index.region_of[self._topology.task(task_id)]]

    def regions_to_restart(self, failed_task: str, unavailable: Iterable[str] = ()) -> list[frozenset[str]]:
        """The restarting regions, the failed task's first, then in the order the rules reach them."""
        return [self._region_tasks[r] for r in self._walk(failed_task, unavailable)[0]]

    def tasks_to_restart(self, failed_task: str, unavailable: Iterable[str] = ()) -> set[str]:
        # One set from chained tuples of names: several times faster than merging frozensets.
        return set(chain.from_iterable(self._walk(failed_task, unavailable)[1]))

    def _walk(self, failed_task: str, unavailable: Iterable[str]) -> tuple[list[int], list[tuple[str, ...]]]:
        """Apply the three rules until nothing changes: (restarting regions, their task names in chunks)."""
        topology = self._topology
        region_of = self._index.region_of
        start = region_of[topology.task(failed_task)]

        # Rule 2, armed per lost partition: once a region reading it restarts, its producer's region does.
        # A lost pipelined partition needs nothing: its producer is in its consumers' region already.
        lost_producers: dict[int, list[int]] = {}  # blocking link -> producer regions of lost partitions
        for partition_id in unavailable:
            p = topology.partition(partition_id)
            if topology.partition_blocking[p]:
                upstream = region_of[topology.partition_producer[p]]
                for link_id in self._partition_links[p]:
                    lost_producers.setdefault(link_id, []).append(upstream)
        link_targets = self._link_targets
        waiting: dict[int, list[int]] = {}  # region -> the links with lost partitions that it reads
        for link_id in lost_producers:
            for region in link_targets[link_id]:
                waiting.setdefault(region, []).append(link_id)

        regions = self._region_count
        successors, hub_next, hub_targets = self._successors, self._hub_next, self._hub_targets
        region_names = self._region_names
        order = [start]  # restarting regions, in the order reached
        chunks = [region_names[start]]  # their task names
        seen = {start}  # regions and hubs reached
        queue = [start]  # nodes whose successors are still to visit, first in first out
        for node in queue:  # grows while iterating
            reached: Sequence[int]
            if node < regions:
                reached = (node,)
                nexts = successors[node]
            else:  # a hub: all its consumer regions at once, then all their successors
                hub = node - regions
                if seen.isdisjoint(self._hub_target_sets[hub]):
                    reached = hub_targets[hub]
                    chunks.append(self._hub_names[hub])
                else:
                    reached = [t for t in hub_targets[hub] if t not in seen]
                    chunks.extend(map(region_names.__getitem__, reached))
                seen.update(reached)
                order.extend(reached)
                nexts = hub_next[hub]
            if waiting and not waiting.keys().isdisjoint(reached):  # rule 2 for the regions just reached
                for region in [r for r in reached if r in waiting]:
                    for link_id in waiting.pop(region, ()):
                        for other in link_targets[link_id]:  # the link fires once: disarm it everywhere
                            if (links := waiting.get(other)) is not None:
                                links.remove(link_id)
                                if not links:
                                    del waiting[other]
                        for upstream in lost_producers.pop(link_id):
                            if upstream not in seen:
                                seen.add(upstream)
                                order.append(upstream)
                                chunks.append(region_names[upstream])
                                queue.append(upstream)
            for nxt in nexts:  # rule 3
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
                    if nxt < regions:
                        order.append(nxt)
                        chunks.append(region_names[nxt])
        return order, chunks

    def __repr__(self) -> str:
        return f"RestartPipelinedRegionFailoverStrategy(regions={self._region_count})"


_FAILOVER_STRATEGIES: dict[str, Callable[[StageGraph], FailoverStrategy]] = {
    "region": RestartPipelinedRegionFailoverStrategy,
    "full": RestartAllFailoverStrategy,
}


def failover_strategy_name(config: Mapping[str, object]) -> str:
    """The validated value of ``jobmanager.execution.failover-strategy`` (default ``region``): a DAG
    parse checks the key without building the strategy's indexes."""
    value = config.get(FAILOVER_STRATEGY_KEY, "region")
    name = value.strip().lower() if isinstance(value, str) else value
    if name not in _FAILOVER_STRATEGIES:
        raise ValueError(
            f"{FAILOVER_STRATEGY_KEY} must be 'region' or 'full', got {value!r}; use 'region' to restart "
            "only the affected regions (default) or 'full' to restart the whole run"
        )
    return name


def load_failover_strategy(config: Mapping[str, object], graph: StageGraph) -> FailoverStrategy:
    """The strategy named by ``jobmanager.execution.failover-strategy`` (default ``region``)."""
    return _FAILOVER_STRATEGIES[failover_strategy_name(config)](graph)
