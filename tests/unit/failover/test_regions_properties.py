"""Property tests of the failover core against a brute-force oracle written independently of it.

The oracle below never touches ``topology.py`` or ``regions.py``: it expands every exchange into
explicit task-to-task edges (all-to-all in full, pointwise by its own copy of Flink's rule), takes
connected components over pipelined edges, merges regions that reach each other over blocking edges
until nothing changes, and computes restart sets as a least fixpoint of Flink's three rules.

Generated graphs: 1-7 stages of parallelism 1-4, each producing 0-2 results, read only by later
stages (so the stage graph is acyclic). Legend: ``==>`` blocking, ``-->`` pipelined, ``*`` all-to-all,
``|`` pointwise. Stages are added to the StageGraph in a shuffled order. Shapes that come up::

    chain / fan-out                  diamond                       twin (a cycle of regions)

    s0 ==*==> s1 --|--> s2       s0 --|--> s1 ==*==> s3        s0[0] --|--> s1[0]    regions {s0[0],s1[0]}
     |                            |                 ^                                and {s0[1],s1[1]} reach
     +===|===> s3                 +==*==> s2 --*----+          s0[1] --|--> s1[1]    each other over the
                                                                                     blocking all-to-all
    s4 (isolated)                                               s0[i] ==*==> s1[j]   s0 ==*==> s1, so they
                                                                 for every i, j      merge into one region

In the "twin" case (drawn a third of the time) a stage reads two results of one producer, one pipelined
pointwise and one blocking all-to-all, and both stages get parallelism >= 2.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from airflow_ft_provider.failover import (
    DistributionPattern,
    RestartAllFailoverStrategy,
    RestartPipelinedRegionFailoverStrategy,
    ResultPartitionType,
    StageGraph,
    pipelined_regions,
)

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

A2A = "all_to_all"
PW = "pointwise"


# ----------------------------------------------------------------------------------------------------
# Graph specifications (plain data, independent of StageGraph) and how to build them.
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    stages: tuple[tuple[str, int], ...]  # (name, parallelism), in a topological order
    results: tuple[tuple[str, str, bool], ...]  # (name, producer stage, blocking)
    consumptions: tuple[tuple[str, str, str], ...]  # (consumer stage, result, A2A | PW)
    stage_order: tuple[int, ...] = ()  # order in which add_stage is called (a permutation)

    def __repr__(self) -> str:
        """Python that rebuilds the graph, so a falsifying example can be pasted into a unit test."""
        lines = ["g = StageGraph()"]
        order = self.stage_order or tuple(range(len(self.stages)))
        for i in order:
            name, par = self.stages[i]
            lines.append(f"g.add_stage({name!r}, {par})")
        for name, producer, blocking in self.results:
            kind = "BLOCKING" if blocking else "PIPELINED"
            lines.append(f"g.add_result({name!r}, {producer!r}, ResultPartitionType.{kind})")
        for stage, result, pattern in self.consumptions:
            lines.append(f"g.consume({stage!r}, {result!r}, DistributionPattern.{pattern.upper()})")
        return "\n".join(lines)


def build(spec: Spec) -> StageGraph:
    graph = StageGraph()
    for i in spec.stage_order or range(len(spec.stages)):
        graph.add_stage(*spec.stages[i])
    for name, producer, blocking in spec.results:
        kind = ResultPartitionType.BLOCKING if blocking else ResultPartitionType.PIPELINED
        graph.add_result(name, producer, kind)
    for stage, result, pattern in spec.consumptions:
        graph.consume(stage, result, DistributionPattern(pattern))
    return graph


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    count = draw(st.integers(1, 7), label="stages")
    # A consumer reading a pipelined-pointwise and a blocking-all-to-all result of one producer; both
    # get parallelism >= 2 so that the pointwise exchange leaves several regions for the cycle to merge.
    twin = count >= 2 and draw(st.integers(0, 2), label="twin") == 0
    pair = (-1, -1)
    if twin:
        consumer = draw(st.integers(1, count - 1))
        pair = (draw(st.integers(0, consumer - 1)), consumer)
    # sampled_from draws near-uniformly (integers() favours its bounds).
    widths = [2, 3, 4], [1, 2, 3, 4]
    stages = [(f"s{i}", draw(st.sampled_from(widths[i not in pair]))) for i in range(count)]
    # Pipelined exchanges merge regions a lot: some graphs have none, which leaves many small regions
    # and all-to-all hubs between them.
    kinds = draw(st.sampled_from([[True], [True, True, False], [True, False]]), label="blocking share")
    results: list[tuple[str, str, bool]] = []
    consumptions: list[tuple[str, str, str]] = []
    if twin:
        producer = pair[0]
        pname, cname = stages[producer][0], stages[consumer][0]
        results += [(f"t{producer}_pipe", pname, False), (f"t{producer}_blk", pname, True)]
        consumptions += [(cname, f"t{producer}_pipe", PW), (cname, f"t{producer}_blk", A2A)]

    for i in range(count):
        for j in range(draw(st.sampled_from([0, 1, 1, 2]))):
            results.append((f"r{i}_{j}", stages[i][0], draw(st.sampled_from(kinds))))
    position = {name: i for i, (name, _) in enumerate(stages)}
    for i in range(1, count):
        taken = {(c[0], c[1]) for c in consumptions}
        readable = [r for r in results if position[r[1]] < i and (stages[i][0], r[0]) not in taken]
        if not readable:
            continue
        # Often the stage just before (long paths through the graph), plus up to two other results.
        previous = [r for r in readable if r[1] == stages[i - 1][0]]
        chosen = draw(st.lists(st.sampled_from(previous), max_size=1)) if previous else []
        chosen += draw(st.lists(st.sampled_from(readable), unique=True, max_size=2))
        chosen = list(dict.fromkeys(chosen))
        for name, _producer, blocking in chosen:
            # A pipelined all-to-all exchange merges both stages into one region: keep it rarer.
            pattern = draw(st.sampled_from([A2A, PW] if blocking else [PW, PW, A2A]))
            consumptions.append((stages[i][0], name, pattern))

    stage_order = tuple(draw(st.permutations(range(count))))
    consumptions = draw(st.permutations(consumptions))
    return Spec(tuple(stages), tuple(results), tuple(consumptions), stage_order)


# ----------------------------------------------------------------------------------------------------
# The oracle: explicit task-level edges, brute force everywhere.
# ----------------------------------------------------------------------------------------------------
def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def oracle_pointwise(sources: int, targets: int) -> list[tuple[int, int]]:
    """(source index, target index) pairs of a pointwise exchange, by Flink's rule."""
    if sources == targets:
        return [(i, i) for i in range(sources)]
    if sources > targets:
        return [
            (s, t)
            for t in range(targets)
            for s in range(t * sources // targets, (t + 1) * sources // targets)
        ]
    return [
        (s, t)
        for s in range(sources)
        for t in range(_ceil_div(s * targets, sources), _ceil_div((s + 1) * targets, sources))
    ]


def _ids(name: str, parallelism: int) -> list[str]:
    return [name] if parallelism == 1 else [f"{name}[{i}]" for i in range(parallelism)]


@dataclass(frozen=True)
class Edge:
    producer: str  # task id
    partition: str  # partition id
    consumer: str  # task id
    blocking: bool


class Oracle:
    def __init__(self, spec: Spec) -> None:
        par = dict(spec.stages)
        self.tasks: list[str] = [t for name, p in spec.stages for t in _ids(name, p)]
        self.partitions: list[str] = []
        info = {name: (producer, blocking) for name, producer, blocking in spec.results}
        for name, producer, _ in spec.results:
            self.partitions += _ids(name, par[producer])
        self.edges: list[Edge] = []
        for stage, result, pattern in spec.consumptions:
            producer, blocking = info[result]
            s, t = par[producer], par[stage]
            pairs = [(i, j) for i in range(s) for j in range(t)] if pattern == A2A else oracle_pointwise(s, t)
            producers, consumers, parts = _ids(producer, s), _ids(stage, t), _ids(result, s)
            self.edges += [Edge(producers[i], parts[i], consumers[j], blocking) for i, j in pairs]
        self.regions: list[frozenset[str]] = self._regions()
        self.region_of: dict[str, int] = {t: r for r, tasks in enumerate(self.regions) for t in tasks}

    def _regions(self) -> list[frozenset[str]]:
        # 1. connected components over pipelined edges (undirected).
        neighbours: dict[str, set[str]] = {t: set() for t in self.tasks}
        for e in self.edges:
            if not e.blocking:
                neighbours[e.producer].add(e.consumer)
                neighbours[e.consumer].add(e.producer)
        label: dict[str, int] = {}
        for root in self.tasks:
            if root in label:
                continue
            label[root] = root_label = len(set(label.values()))
            queue = deque([root])
            while queue:
                for nxt in neighbours[queue.popleft()]:
                    if nxt not in label:
                        label[nxt] = root_label
                        queue.append(nxt)
        # 2. merge regions that reach each other over blocking edges, until stable.
        while True:
            ids = sorted(set(label.values()))
            succ: dict[int, set[int]] = {r: set() for r in ids}
            for e in self.edges:
                if e.blocking and label[e.producer] != label[e.consumer]:
                    succ[label[e.producer]].add(label[e.consumer])
            reach: dict[int, set[int]] = {}
            for r in ids:  # transitive closure by a search from every region
                seen, stack = set(), list(succ[r])
                while stack:
                    x = stack.pop()
                    if x not in seen:
                        seen.add(x)
                        stack.extend(succ[x])
                reach[r] = seen
            merge = {r: min([r] + [x for x in reach[r] if r in reach[x]]) for r in ids}
            if all(merge[r] == r for r in ids):
                break
            label = {t: merge[r] for t, r in label.items()}
        groups: dict[int, set[str]] = {}
        for t in self.tasks:
            groups.setdefault(label[t], set()).add(t)
        return [frozenset(g) for g in groups.values()]

    def restart_regions(self, failed: str, unavailable: frozenset[str]) -> set[int]:
        """Least fixpoint of Flink's three rules, iterated over every edge until nothing changes."""
        region = self.region_of
        restart = {region[failed]}  # rule 1
        while True:
            grown = set(restart)
            for e in self.edges:
                if region[e.consumer] in restart and (e.partition in unavailable or not e.blocking):
                    grown.add(region[e.producer])  # rule 2
                if region[e.producer] in restart:
                    grown.add(region[e.consumer])  # rule 3
            if grown == restart:
                return restart
            restart = grown

    def tasks_of(self, regions: set[int]) -> set[str]:
        return {t for r in regions for t in self.regions[r]}


Case = tuple[Spec, str, frozenset[str]]  # graph, failed task, unavailable partitions


@st.composite
def failures(draw: st.DrawFn) -> Case:
    """A graph, a failed task and a subset of its partitions (blocking or pipelined) reported lost."""
    spec = draw(specs())
    oracle_tasks = [t for name, p in spec.stages for t in _ids(name, p)]
    par = dict(spec.stages)
    partitions = sorted(p for name, producer, _ in spec.results for p in _ids(name, par[producer]))
    # Half the time a task of the first stages: failures upstream reach further.
    upstream = [t for name, p in spec.stages[: (len(spec.stages) + 1) // 2] for t in _ids(name, p)]
    failed = draw(st.sampled_from(upstream) | st.sampled_from(oracle_tasks), label="failed")
    if not partitions:
        return spec, failed, frozenset()
    few = st.sets(st.sampled_from(partitions))
    most = few.map(lambda kept: set(partitions) - kept)  # a lost worker: backtracking goes far
    return spec, failed, frozenset(draw(few | most, label="unavailable"))


# Hand-picked examples, besides the random ones.
TWIN = Spec(
    (("a", 2), ("b", 2)),
    (("pipe", "a", False), ("blk", "a", True)),
    (("b", "pipe", PW), ("b", "blk", A2A)),
)
CHAIN = Spec(
    (("a", 3), ("b", 2), ("c", 4)),
    (("ra", "a", True), ("rb", "b", True)),
    (("b", "ra", PW), ("c", "rb", PW)),
)
DIAMOND = Spec(
    (("a", 1), ("b", 2), ("c", 3), ("d", 1)),
    (("ra", "a", True), ("rb", "b", False), ("rc", "c", True)),
    (("b", "ra", A2A), ("c", "ra", A2A), ("d", "rb", A2A), ("d", "rc", A2A)),
)

# A cycle of regions through a region of another stage group: {a[i], c[i]} ==> b[i] ==> {a[i], c[i]}.
DETOUR = Spec(
    (("a", 2), ("b", 2), ("c", 2)),
    (("pipe", "a", False), ("ra", "a", True), ("rb", "b", True)),
    (("c", "pipe", PW), ("b", "ra", PW), ("c", "rb", PW)),
)

# An all-to-all hub s0 ==*==> s2 whose consumer regions differ: s2[i] also reads s1[i] and feeds s3[i].
HUB = Spec(
    (("s0", 2), ("s1", 2), ("s2", 2), ("s3", 2)),
    (("r0", "s0", True), ("r1", "s1", True), ("r2", "s2", True)),
    (("s2", "r0", A2A), ("s2", "r1", PW), ("s3", "r2", PW)),
)


# ----------------------------------------------------------------------------------------------------
# The oracle itself: its pointwise rule covers everything exactly as Flink's does.
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sources", range(1, 9))
@pytest.mark.parametrize("targets", range(1, 9))
def test_oracle_pointwise_rule_is_a_union_of_stars(sources: int, targets: int) -> None:
    pairs = oracle_pointwise(sources, targets)
    assert {s for s, _ in pairs} == set(range(sources))
    assert {t for _, t in pairs} == set(range(targets))
    assert len(pairs) == max(sources, targets)  # each task of the larger side has exactly one peer
    fan = {}
    for s, t in pairs:
        fan.setdefault(s, []).append(t)
    for ts in fan.values():  # the smaller side's peers are contiguous, in order
        assert ts == list(range(ts[0], ts[-1] + 1))


def test_oracle_regions_of_hand_picked_graphs() -> None:
    assert set(Oracle(TWIN).regions) == {frozenset({"a[0]", "a[1]", "b[0]", "b[1]"})}
    assert set(Oracle(CHAIN).regions) == {frozenset({t}) for t in Oracle(CHAIN).tasks}
    assert set(Oracle(DIAMOND).regions) == {
        frozenset({"a"}),
        frozenset({"b[0]", "b[1]", "d"}),
        frozenset({"c[0]"}),
        frozenset({"c[1]"}),
        frozenset({"c[2]"}),
    }
    assert set(Oracle(DETOUR).regions) == {
        frozenset({"a[0]", "b[0]", "c[0]"}),
        frozenset({"a[1]", "b[1]", "c[1]"}),
    }
    hub = Oracle(HUB)
    assert hub.tasks_of(hub.restart_regions("s0[0]", frozenset({"r1[1]"}))) == {
        "s0[0]",
        "s2[0]",
        "s2[1]",
        "s3[0]",
        "s3[1]",
        "s1[1]",
    }


# ----------------------------------------------------------------------------------------------------
# Properties of the implementation.
# ----------------------------------------------------------------------------------------------------
@SETTINGS
@given(specs())
@example(TWIN)
@example(CHAIN)
@example(DIAMOND)
@example(DETOUR)
def test_pipelined_regions_match_oracle(spec: Spec) -> None:
    oracle = Oracle(spec)
    graph = build(spec)
    regions = pipelined_regions(graph)

    assert sorted(graph.task_ids()) == sorted(oracle.tasks)
    covered = [t for region in regions for t in region]
    assert all(regions), f"an empty region in {regions}"
    assert len(covered) == len(set(covered)), f"regions overlap: {regions}"
    assert set(covered) == set(oracle.tasks), "regions do not cover exactly the tasks"
    assert set(regions) == set(oracle.regions)

    # Documented order: by each region's first task, in StageGraph.task_ids() order.
    position = {t: i for i, t in enumerate(graph.task_ids())}
    firsts = [min(position[t] for t in region) for region in regions]
    assert firsts == sorted(firsts)

    strategy = RestartPipelinedRegionFailoverStrategy(graph)
    assert strategy.regions == regions
    for task in oracle.tasks:
        assert strategy.region_of(task) == oracle.regions[oracle.region_of[task]]


@SETTINGS
@given(failures())
@example((TWIN, "b[1]", frozenset()))
@example((CHAIN, "c[3]", frozenset({"rb[1]"})))
@example((CHAIN, "c[0]", frozenset({"rb[0]", "ra[0]", "ra[1]"})))
@example((DIAMOND, "d", frozenset({"rc[1]"})))
@example((DIAMOND, "c[2]", frozenset({"ra"})))
@example((DETOUR, "b[1]", frozenset({"pipe[1]", "ra[0]"})))
@example((HUB, "s0[0]", frozenset({"r1[1]"})))
def test_restart_set_matches_least_fixpoint_of_the_three_rules(case: Case) -> None:
    spec, failed, lost = case
    note(f"failed={failed!r} unavailable={sorted(lost)!r}")
    oracle = Oracle(spec)
    strategy = RestartPipelinedRegionFailoverStrategy(build(spec))
    got = strategy.tasks_to_restart(failed, lost)

    # Whole regions only.
    chosen: set[int] = set()
    for r, region in enumerate(oracle.regions):
        inside = region & got
        assert not inside or inside == region, f"region {sorted(region)} restarts only {sorted(inside)}"
        if inside:
            chosen.add(r)
    assert got <= set(oracle.tasks)

    # Rule 1: the failed task's region.
    failed_region = oracle.region_of[failed]
    assert failed in got and oracle.regions[failed_region] <= got

    # Rule 3: closed under consumer regions.
    for e in oracle.edges:
        if e.producer in got:
            assert e.consumer in got, f"{e.producer} restarts, its consumer {e.consumer} ({e.partition}) not"

    # Rule 2: producers of lost or pipelined partitions read by a restarting region restart too.
    for e in oracle.edges:
        if e.consumer in got and (e.partition in lost or not e.blocking):
            assert e.producer in got, f"{e.consumer} restarts reading lost {e.partition} but {e.producer} not"

    # Characterisation: a region restarts iff it is the failed one, or reads from another restarting
    # region, or produces a lost/pipelined partition read by another restarting region.
    region = oracle.region_of
    for r in range(len(oracle.regions)):
        justified = r == failed_region or any(
            (region[e.consumer] == r and region[e.producer] != r and region[e.producer] in chosen)
            or (
                region[e.producer] == r
                and region[e.consumer] != r
                and region[e.consumer] in chosen
                and (e.partition in lost or not e.blocking)
            )
            for e in oracle.edges
        )
        assert (r in chosen) == justified, (
            f"region {sorted(oracle.regions[r])} {'restarts' if r in chosen else 'does not restart'} "
            f"but the rules say {'yes' if justified else 'no'}"
        )

    # Minimality: exactly the least fixpoint.
    expected = oracle.tasks_of(oracle.restart_regions(failed, lost))
    assert got == expected, f"extra {sorted(got - expected)}, missing {sorted(expected - got)}"

    # Region view agrees: the failed task's region first, no duplicates, same tasks.
    regions = strategy.regions_to_restart(failed, lost)
    assert regions[0] == oracle.regions[failed_region]
    assert len(regions) == len(set(regions))
    assert set().union(*regions) == got

    # Monotone in the lost partitions: losing fewer never restarts more.
    fewer = sorted(lost)[: len(lost) // 2]
    assert strategy.tasks_to_restart(failed, fewer) <= got
    assert strategy.tasks_to_restart(failed) <= got


@settings(max_examples=100, deadline=None)
@given(failures())
def test_restart_all_returns_every_task(case: Case) -> None:
    spec, failed, lost = case
    graph = build(spec)
    assert RestartAllFailoverStrategy(graph).tasks_to_restart(failed, lost) == set(Oracle(spec).tasks)
