"""Pipelined regions, computed as Flink does.

1. Union the tasks joined by pipelined exchanges (they run, and fail, together).
2. Build region → region dependencies over blocking exchanges and merge every strongly connected
   group of regions (Tarjan). Without this merge a pointwise-pipelined + all-to-all-blocking graph
   forms a cycle of regions that could neither be scheduled nor restarted on its own.

An all-to-all blocking exchange becomes one hub node between its producer and consumer regions, so the
dependency graph stays linear in the number of tasks instead of quadratic in stage width.

Step 2 only looks at blocking exchanges that can lie on a cycle of regions. Every region lies inside
one group of stages joined by pipelined exchanges, so a cycle of regions maps to a closed walk between
such stage groups and stays inside one strongly connected set of them: a blocking exchange between
two different sets (in a chain of blocking stages, every one) can be left out. That check is made
on stages, so it costs nothing per task.
"""

from __future__ import annotations

from .graph import StageGraph
from .topology import Topology
from .union_find import UnionFind


def _strongly_connected(adjacency: list[list[int]]) -> list[list[int]]:
    """Tarjan's algorithm, iterative (graphs of 100k nodes would overflow Python's recursion)."""
    size = len(adjacency)
    index = [-1] * size
    low = [0] * size
    on_stack = [False] * size
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for root in range(size):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        while work:
            node, edge = work[-1]
            if edge == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack[node] = True
            neighbours = adjacency[node]
            while edge < len(neighbours):
                nxt = neighbours[edge]
                edge += 1
                if index[nxt] == -1:
                    work[-1] = (node, edge)
                    work.append((nxt, 0))
                    break
                if on_stack[nxt] and index[nxt] < low[node]:
                    low[node] = index[nxt]
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    if low[node] < low[parent]:
                        low[parent] = low[node]
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack[member] = False
                        component.append(member)
                        if member == node:
                            break
                    components.append(component)
    return components


class RegionIndex:
    """Region membership of every task of a Topology: ``region_of[task]`` and ``members[region]``."""

    def __init__(self, topology: Topology) -> None:
        tasks = len(topology.task_names)
        producer = topology.partition_producer
        uf = UnionFind(tasks)
        for link in topology.links:
            if link.blocking:
                continue
            anchor = link.consumers.start
            for p in link.partitions:
                uf.union(anchor, producer[p])
            for c in link.consumers:
                uf.union(anchor, c)

        raw_of = self._number(uf, tasks)
        raw_count = max(raw_of, default=-1) + 1
        merge = UnionFind(raw_count)
        for component in self._blocking_cycles(topology, raw_of, raw_count):
            for region in component[1:]:
                merge.union(component[0], region)
        self.region_of: list[int] = self._number(merge, raw_count, raw_of)
        self.members: list[list[int]] = [[] for _ in range(max(self.region_of, default=-1) + 1)]
        for task, region in enumerate(self.region_of):
            self.members[region].append(task)

    @staticmethod
    def _number(uf: UnionFind, size: int, through: list[int] | None = None) -> list[int]:
        """Dense region numbers in order of first appearance, optionally composed with ``through``."""
        numbers: dict[int, int] = {}
        items = range(size) if through is None else through
        return [numbers.setdefault(uf.find(item), len(numbers)) for item in items]

    @staticmethod
    def _exchanges_on_cycles(topology: Topology) -> list[bool]:
        """Per exchange: can it be part of a cycle of regions? (See the module docstring.)"""
        stages = 1 + max((max(p, c) for p, c, _ in topology.exchanges), default=-1)
        joined = UnionFind(stages)
        for producer, consumer, blocking in topology.exchanges:
            if not blocking:
                joined.union(producer, consumer)
        group = [joined.find(stage) for stage in range(stages)]
        adjacency: list[list[int]] = [[] for _ in range(stages)]
        for producer, consumer, blocking in topology.exchanges:
            if blocking and group[producer] != group[consumer]:
                adjacency[group[producer]].append(group[consumer])
        strong = [0] * stages
        for number, component in enumerate(_strongly_connected(adjacency)):
            for node in component:
                strong[node] = number
        return [strong[group[p]] == strong[group[c]] for p, c, _ in topology.exchanges]

    @classmethod
    def _blocking_cycles(cls, topology: Topology, region_of: list[int], count: int) -> list[list[int]]:
        on_cycles = cls._exchanges_on_cycles(topology)
        if not any(on_cycles[e] for e, (_, _, blocking) in enumerate(topology.exchanges) if blocking):
            return []
        adjacency: list[list[int]] = [[] for _ in range(count)]
        producer = topology.partition_producer
        for link in topology.links:
            if not link.blocking or not on_cycles[link.exchange]:
                continue
            sources = {region_of[producer[p]] for p in link.partitions}
            targets = {region_of[c] for c in link.consumers}
            if len(sources) == 1 and len(targets) == 1:
                (source,), (target,) = sources, targets
                if source != target:
                    adjacency[source].append(target)
                continue
            hub = len(adjacency)
            adjacency.append(list(targets))
            for source in sources:
                adjacency[source].append(hub)
        return [
            regions
            for component in _strongly_connected(adjacency)
            if len(regions := [node for node in component if node < count]) > 1
        ]

    def task_sets(self, topology: Topology) -> list[frozenset[str]]:
        names = topology.task_names
        return [frozenset(names[t] for t in members) for members in self.members]


def pipelined_regions(graph: StageGraph) -> list[frozenset[str]]:
    """Task ids per failover region, in order of each region's first task."""
    topology = Topology(graph)
    return RegionIndex(topology).task_sets(topology)
