"""The provider's part of a restart's latency, by region size: from a failure to its restart set
cleared (decision, journal compare-and-swap, clears), next to a manual restart of the same region.

    python bench/bench_restart_decision.py [--sizes 1,10,100,300] [--repeat 5]

A region of N tasks is a chain of N stages joined by pipelined exchanges; its last stage fails, so all
N restart (N - 1 cleared by the REST API). The REST API is scripted (it answers at once and counts
calls): what is measured is this package's work and its S3 round trips to a moto server over HTTP,
not Airflow's scheduler (bench_failover_latency.py measures that, for a small region, in a live
Airflow). Per size: median wall time of ``RunRecovery.handle_failure`` and of ``restart_regions``,
REST calls, S3 requests, and the journal's state size. Writes bench/results/restart_decision.json.
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
from airflow_ft_provider.failover.graph import ResultPartitionType  # noqa: E402
from airflow_ft_provider.hooks.task_instances import TaskInstanceRow  # noqa: E402
from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration  # noqa: E402
from airflow_ft_provider.model.exchanges import Input, Output  # noqa: E402
from airflow_ft_provider.partitions import S3PartitionStore  # noqa: E402
from airflow_ft_provider.recovery.run_recovery import RunRecovery  # noqa: E402
from ft_harness.services.s3_server import start_moto_server, stop_moto_server  # noqa: E402

RESULTS = REPO / "bench" / "results" / "restart_decision.json"
PIPELINED = ResultPartitionType.PIPELINED


class CountingApi:
    """Every task of the run is running its first try; clears end it and start the second."""

    def __init__(self, tasks: list[str]) -> None:
        self.tasks, self.calls = tasks, 0

    def instances(self, dag_id: str, run_id: str) -> list[TaskInstanceRow]:
        self.calls += 1
        return [TaskInstanceRow(t, -1, 1, "running", f"id-{t}") for t in self.tasks]

    def clear_instances(self, dag_id: str, run_id: str, keys: list[tuple[str, int]]) -> list[TaskInstanceRow]:
        self.calls += 1
        return [TaskInstanceRow(t, m, 2) for t, m in keys]

    def try_state(self, *args: object) -> str | None:
        self.calls += 1
        return "failed"


def region(n: int) -> PipelineDescription:
    stages = [
        StageDeclaration(
            f"s{i}",
            1,
            (Input(f"r{i - 1}"),) if i else (),
            (Output(f"r{i}", PIPELINED),) if i < n - 1 else (),
        )
        for i in range(n)
    ]
    config = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 10**6}
    return PipelineDescription("bench_restart", stages, restart_config=config)


def measure(store: S3PartitionStore, n: int, repeat: int) -> dict[str, float | int]:
    description = region(n)
    tasks = [f"s{i}" for i in range(n)]
    requests: list[str] = []
    store.client.meta.events.register("before-call.s3", lambda model, **kw: requests.append(model.name))
    failure, manual, calls, s3 = [], [], [], []
    for r in range(repeat):
        api = CountingApi(tasks)
        recovery = RunRecovery(description, f"run{n}_{r}", store, api=api, clock=ManualClock(1000.0))
        requests.clear()
        started = time.perf_counter()
        decision = recovery.handle_failure(f"s{n - 1}", None, 1, RuntimeError("boom"))
        failure.append(time.perf_counter() - started)
        assert decision.restart and len(decision.tasks) == n
        calls.append(api.calls)
        s3.append(len(requests))
        started = time.perf_counter()
        recovery.restart_regions("s0", reason="bench")
        manual.append(time.perf_counter() - started)
    state = store.json_objects.get_bytes(recovery.journal.state_key)
    return {
        "region_tasks": n,
        "failure_to_cleared_ms": 1000 * statistics.median(failure),
        "manual_restart_ms": 1000 * statistics.median(manual),
        "rest_calls": statistics.median(calls),
        "s3_requests": statistics.median(s3),
        "journal_state_bytes": len(state.value) if state else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,10,100,300")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    s3 = start_moto_server()
    try:
        s3.client().create_bucket(Bucket="ft-bench-restart")
        store = S3PartitionStore(s3.client(), "s3://ft-bench-restart/pipelines/")
        rows = [measure(store, int(n), args.repeat) for n in args.sizes.split(",")]
    finally:
        stop_moto_server(s3)
    base = rows[0]["failure_to_cleared_ms"]
    print(
        f"{'tasks':>6} {'failure→cleared':>16} {'ratio':>6} {'manual':>9} {'REST':>5} {'S3':>4} {'state':>8}"
    )
    for row in rows:
        latency = row["failure_to_cleared_ms"]
        print(
            f"{row['region_tasks']:>6} {latency:>13.1f} ms {latency / base:>6.2f}"
            f" {row['manual_restart_ms']:>6.1f} ms {row['rest_calls']:>5} {row['s3_requests']:>4}"
            f" {row['journal_state_bytes']:>6} B"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"repeat": args.repeat, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
