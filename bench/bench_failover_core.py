"""Timings of the pure failover core on large generated graphs.

    python bench/bench_failover_core.py [--quick] [--repeat N] [--only NAME]

For every graph: tasks, task-level edges (an all-to-all exchange counts producers x consumers),
regions, the best-of-N time of ``pipelined_regions`` and of building a
``RestartPipelinedRegionFailoverStrategy``, and the worst best-of-N time of one ``tasks_to_restart``
call over four failures: the first task of the source stage and the middle task of the middle stage,
each with no partition reported lost and with its input partitions lost (for the source, which reads
nothing, the middle task's inputs). Results go to bench/results/failover_core.json.

Targets: regions of 100k tasks / 1M edges in under 1 s; one restart set in under 10 ms.
``--quick`` runs graphs ten times smaller, as a smoke test.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from airflow_ft_provider.failover import (
    DistributionPattern,
    RestartPipelinedRegionFailoverStrategy,
    ResultPartitionType,
    StageGraph,
    pipelined_regions,
)

BLOCKING, PIPELINED = ResultPartitionType.BLOCKING, ResultPartitionType.PIPELINED
A2A, POINTWISE = DistributionPattern.ALL_TO_ALL, DistributionPattern.POINTWISE

REGIONS_TARGET_S = 1.0
RESTART_TARGET_S = 0.010
RESULTS = Path(__file__).resolve().parent / "results" / "failover_core.json"


# -- graphs ---------------------------------------------------------------------------------------------
def chain(
    stages: int, parallelism: int, links: list[tuple[ResultPartitionType, DistributionPattern]]
) -> StageGraph:
    """stages in a line; stage i reads stage i-1 by links[(i-1) % len(links)]."""
    graph = StageGraph()
    for i in range(stages):
        graph.add_stage(f"s{i}", parallelism)
    for i in range(1, stages):
        kind, pattern = links[(i - 1) % len(links)]
        graph.add_result(f"r{i - 1}", f"s{i - 1}", kind)
        graph.consume(f"s{i}", f"r{i - 1}", pattern)
    return graph


def twin_blocks(blocks: int, parallelism: int) -> StageGraph:
    """Pairs (a_k, b_k): pointwise pipelined + all-to-all blocking (a cycle of regions, merged);
    b_k feeds a_{k+1} pointwise blocking."""
    graph = StageGraph()
    for k in range(blocks):
        a, b = f"a{k}", f"b{k}"
        graph.add_stage(a, parallelism)
        graph.add_stage(b, parallelism)
        graph.add_result(f"{a}_pipe", a, PIPELINED)
        graph.add_result(f"{a}_blk", a, BLOCKING)
        graph.consume(b, f"{a}_pipe", POINTWISE)
        graph.consume(b, f"{a}_blk", A2A)
        if k:
            graph.add_result(f"b{k - 1}_out", f"b{k - 1}", BLOCKING)
            graph.consume(a, f"b{k - 1}_out", POINTWISE)
    return graph


def pipelines_closed_by_all_to_all(stages: int, parallelism: int) -> StageGraph:
    """Pointwise pipelined lines s0 -> ... -> s_last, plus s0 ==*==> s_last: one big cycle of regions."""
    graph = chain(stages, parallelism, [(PIPELINED, POINTWISE)])
    graph.add_result("closing", "s0", BLOCKING)
    graph.consume(f"s{stages - 1}", "closing", A2A)
    return graph


@dataclass
class Case:
    name: str
    kind: str
    build: Callable[[], StageGraph]


def cases(quick: bool) -> list[Case]:
    d = 10 if quick else 1  # --quick: ten times fewer tasks
    return [
        Case(
            f"chain_blocking_pw_{10_000 // d}x10",
            "(a) long chain, blocking pointwise",
            lambda: chain(10_000 // d, 10, [(BLOCKING, POINTWISE)]),
        ),
        Case(
            f"wide_a2a_blocking_{100 // d}x1000",
            "(b) wide all-to-all, blocking",
            lambda: chain(100 // d, 1000, [(BLOCKING, A2A)]),
        ),
        Case(
            f"wide_a2a_alternating_{100 // d}x1000",
            "(b) wide all-to-all, pipelined/blocking alternating",
            lambda: chain(100 // d, 1000, [(PIPELINED, A2A), (BLOCKING, A2A)]),
        ),
        Case(
            f"pw_pipelines_10x{10_000 // d}",
            "(c) embarrassingly parallel pointwise pipelines",
            lambda: chain(10, 10_000 // d, [(PIPELINED, POINTWISE)]),
        ),
        Case(
            f"twin_blocks_{50 // d}x2x1000",
            "(d) pw-pipelined + a2a-blocking cycles, chained",
            lambda: twin_blocks(50 // d, 1000),
        ),
        Case(
            f"pw_pipelines_closed_10x{10_000 // d}",
            "(d) pw pipelines closed by one a2a-blocking edge",
            lambda: pipelines_closed_by_all_to_all(10, 10_000 // d),
        ),
    ]


# -- measuring ------------------------------------------------------------------------------------------
def best_of(repeat: int, fn: Callable[[], object]) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def task_level_edges(graph: StageGraph) -> int:
    return sum(
        len(group.partitions) * len(group.consumers)
        for consumption in graph.consumptions
        for group in graph.exchange_groups(consumption)
    )


def input_partitions(graph: StageGraph, stage: str, index: int) -> list[str]:
    """The partitions that map index ``index`` of ``stage`` reads."""
    found: list[str] = []
    for consumption in graph.consumptions:
        if consumption.stage != stage:
            continue
        producer = graph.stages[graph.results[consumption.result].producer]
        names = graph.partition_ids(consumption.result)
        for group in graph.exchange_groups(consumption):
            if index in group.consumers:
                found += [names[p] for p in group.partitions]
        assert len(names) == producer.parallelism
    return found


def task_id(graph: StageGraph, stage: str, index: int) -> str:
    return graph.stages[stage].task_ids[index]


@dataclass
class Row:
    name: str
    kind: str
    tasks: int
    edges: int
    regions: int
    build_s: float
    regions_s: float
    strategy_s: float
    restart_worst_s: float = 0.0
    restart_worst_case: str = ""
    restarts: list[dict[str, object]] = field(default_factory=list)


def measure(case: Case, repeat: int, restart_repeat: int) -> Row:
    build_s, graph = best_of(1, case.build)
    assert isinstance(graph, StageGraph)
    tasks = sum(s.parallelism for s in graph.stages.values())
    regions_s, regions = best_of(repeat, lambda: pipelined_regions(graph))
    strategy_s, strategy = best_of(repeat, lambda: RestartPipelinedRegionFailoverStrategy(graph))
    assert isinstance(regions, list) and isinstance(strategy, RestartPipelinedRegionFailoverStrategy)
    row = Row(
        case.name, case.kind, tasks, task_level_edges(graph), len(regions), build_s, regions_s, strategy_s
    )

    names = list(graph.stages)
    source, middle = names[0], names[len(names) // 2]
    mid_index = graph.stages[middle].parallelism // 2
    middle_inputs = input_partitions(graph, middle, mid_index)
    failures = [
        ("source", task_id(graph, source, 0), []),
        ("source+lost", task_id(graph, source, 0), input_partitions(graph, source, 0) or middle_inputs),
        ("middle", task_id(graph, middle, mid_index), []),
        ("middle+lost", task_id(graph, middle, mid_index), middle_inputs),
    ]
    for label, failed, lost in failures:
        seconds, restart = best_of(
            restart_repeat, lambda failed=failed, lost=lost: strategy.tasks_to_restart(failed, lost)
        )
        assert isinstance(restart, set)
        row.restarts.append(
            {
                "case": label,
                "failed": failed,
                "unavailable": len(lost),
                "restart_tasks": len(restart),
                "s": seconds,
            }
        )
        if seconds >= row.restart_worst_s:
            row.restart_worst_s, row.restart_worst_case = seconds, f"{label} ({len(restart)} tasks)"
    return row


def fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:9.2f} ms" if seconds < 10 else f"{seconds:9.2f} s "


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="graphs ten times smaller (a smoke test)")
    parser.add_argument("--repeat", type=int, default=3, help="best of N for region computation (default 3)")
    parser.add_argument("--only", help="run only the graphs whose name contains this")
    args = parser.parse_args(argv)
    restart_repeat = 10

    header = (
        f"{'graph':<34} {'tasks':>8} {'edges':>12} {'regions':>8} {'pipelined_regions':>17} "
        f"{'strategy init':>13} {'restart (worst)':>15}  worst case"
    )
    print(header)
    print("-" * len(header))
    rows: list[Row] = []
    for case in cases(args.quick):
        if args.only and args.only not in case.name:
            continue
        row = measure(case, args.repeat, restart_repeat)
        rows.append(row)
        print(
            f"{row.name:<34} {row.tasks:>8,} {row.edges:>12,} {row.regions:>8,} {fmt_s(row.regions_s):>17} "
            f"{fmt_s(row.strategy_s):>13} {fmt_s(row.restart_worst_s):>15}  {row.restart_worst_case}",
            flush=True,
        )

    slow_regions = [r.name for r in rows if max(r.regions_s, r.strategy_s) >= REGIONS_TARGET_S]
    slow_restart = [r.name for r in rows if r.restart_worst_s >= RESTART_TARGET_S]
    print()
    print(
        f"regions target (< {REGIONS_TARGET_S:g} s): "
        + ("met" if not slow_regions else "MISSED by " + ", ".join(slow_regions))
    )
    print(
        f"restart target (< {RESTART_TARGET_S * 1000:g} ms): "
        f"{'met' if not slow_restart else 'MISSED by ' + ', '.join(slow_restart)}"
    )

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "quick": args.quick,
                "repeat": args.repeat,
                "restart_repeat": restart_repeat,
                "python": sys.version.split()[0],
                "machine": platform.platform(),
                "targets": {"regions_s": REGIONS_TARGET_S, "restart_s": RESTART_TARGET_S},
                "targets_met": {"regions": not slow_regions, "restart": not slow_restart},
                "graphs": [row.__dict__ for row in rows],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"results written to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
