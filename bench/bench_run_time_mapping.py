"""What deciding a map count at run time costs a region restart: a 300-index stage mapped over another
task's output, next to the same stage mapped over a literal list, side by side in one run.

    python bench/bench_run_time_mapping.py [--indexes 300] [--repeat 7]

    list ──▶ [parse[i] ~~parsed[i] (pipelined, pointwise)~~▶ score[i]] ──scores──▶ report

``score[150]`` fails; what is timed is the provider's part of the restart, the only part that differs
between the two (Airflow maps and schedules both the same way): the failing try's decision with its
clears (``RunRecovery.handle_failure``), then the restarted try's door (the run's pipeline settled, the
run-time count recorded or found recorded, the restart gate: ``operators/try_gate.enter_try`` without
the operator). The REST API is scripted (it answers at once); S3 is a moto server over HTTP. Variants
alternate, each on a run of its own; medians. Writes bench/results/run_time_mapping.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.failover import ManualClock  # noqa: E402
from airflow_ft_provider.failover.graph import DistributionPattern, ResultPartitionType  # noqa: E402
from airflow_ft_provider.hooks.task_instances import TaskInstanceRow  # noqa: E402
from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration  # noqa: E402
from airflow_ft_provider.model.exchanges import Input, Output  # noqa: E402
from airflow_ft_provider.model.map_counts import RunTimeCount  # noqa: E402
from airflow_ft_provider.partitions import S3PartitionStore  # noqa: E402
from airflow_ft_provider.recovery.run_recovery import RunRecovery  # noqa: E402
from airflow_ft_provider.recovery.try_start import Proceed, WaitUntil  # noqa: E402
from ft_harness.services.s3_server import start_moto_server, stop_moto_server  # noqa: E402

RESULTS = REPO / "bench" / "results" / "run_time_mapping.json"
PIPELINED = ResultPartitionType.PIPELINED
POINTWISE = DistributionPattern.POINTWISE
FAILING = 150


class ScriptedApi:
    """Every task of the run ran its first try; clears start the second at once."""

    def __init__(self, keys: list[tuple[str, int]]) -> None:
        self.keys = keys

    def instances(self, dag_id: str, run_id: str) -> list[TaskInstanceRow]:
        return [TaskInstanceRow(t, m, 1, "running", f"id-{t}-{m}") for t, m in self.keys]

    def clear_instances(self, dag_id: str, run_id: str, keys: list[tuple[str, int]]) -> list[TaskInstanceRow]:
        return [TaskInstanceRow(t, m, 2) for t, m in keys]

    def try_state(self, *args: object) -> str | None:
        return "failed"


def pipeline(indexes: int, *, run_time: bool) -> PipelineDescription:
    declared = 1 if run_time else indexes
    mapped = {"mapped": True, "expands_at_run_time": run_time}
    return PipelineDescription(
        "bench_run_time_mapping",
        [
            StageDeclaration("parse", declared, (), (Output("parsed", PIPELINED),), **mapped),
            StageDeclaration("score", declared, (Input("parsed", POINTWISE),), (Output("scores"),), **mapped),
            StageDeclaration("report", 1, (Input("scores"),), ()),
        ],
        restart_config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "0 s"},
    )


def one_restart(store: S3PartitionStore, indexes: int, run_id: str, *, run_time: bool) -> tuple[float, float]:
    """(decision with clears, the restarted try's door) in seconds, on a fresh run."""
    parsed = pipeline(indexes, run_time=run_time)
    context = {"run_id": run_id}
    for stage in ("parse", "score"):  # the first tries of the run: store the pipeline, record counts
        count = RunTimeCount(stage, indexes, 1) if run_time else None
        RunRecovery.for_worker(context, parsed=parsed, store=store, settle=True, expanded=count)
    keys = [(s, i) for s in ("parse", "score") for i in range(indexes)]
    clock = ManualClock(1000.0)
    stored = RunRecovery.for_reader(store, parsed.dag_id, run_id).pipeline
    started = time.perf_counter()
    decision = RunRecovery(stored, run_id, store, api=ScriptedApi(keys), clock=clock).handle_failure(
        "score", FAILING, 1, RuntimeError("boom")
    )
    decided = time.perf_counter() - started
    assert decision.restart and {f"parse[{FAILING}]", f"score[{FAILING}]"} <= set(decision.tasks)
    started = time.perf_counter()
    count = RunTimeCount("score", indexes, 2) if run_time else None
    door = RunRecovery.for_worker(context, parsed=parsed, store=store, settle=True, expanded=count)
    gate = RunRecovery(door.pipeline, run_id, store, api=ScriptedApi(keys), clock=clock)
    start = gate.before_try("score", FAILING, 2)
    entered = time.perf_counter() - started
    assert isinstance(start, (Proceed, WaitUntil)), start
    assert door.pipeline.graph.stages["score"].parallelism == indexes
    return decided, entered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--indexes", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    s3 = start_moto_server()
    figures: dict[str, dict[str, list[float]]] = {
        way: {"decision": [], "door": []} for way in ("literal", "run_time")
    }
    try:
        s3.client().create_bucket(Bucket="ft-bench-mapping")
        store = S3PartitionStore(s3.client(), "s3://ft-bench-mapping/pipelines/")
        for r in range(args.repeat + 1):  # round 0 warms up
            for way in ("literal", "run_time") if r % 2 else ("run_time", "literal"):
                decided, entered = one_restart(store, args.indexes, f"{way}_{r}", run_time=way == "run_time")
                if r:
                    figures[way]["decision"].append(decided)
                    figures[way]["door"].append(entered)
    finally:
        stop_moto_server(s3)
    rows = {
        way: {part: 1000 * statistics.median(values) for part, values in parts.items()}
        for way, parts in figures.items()
    }
    for row in rows.values():
        row["total"] = row["decision"] + row["door"]
    print(f"{args.indexes} indexes, score[{FAILING}] fails; medians of {args.repeat}")
    print(f"{'map':>10} {'decision+clears':>16} {'restarted door':>15} {'total':>9}")
    for way, row in rows.items():
        print(f"{way:>10} {row['decision']:>13.1f} ms {row['door']:>12.1f} ms {row['total']:>6.1f} ms")
    ratio = rows["run_time"]["total"] / rows["literal"]["total"]
    print(f"run-time / literal: {ratio:.2f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps({"indexes": args.indexes, "repeat": args.repeat, "ms": rows, "ratio": ratio}, indent=2)
    )


if __name__ == "__main__":
    main()
