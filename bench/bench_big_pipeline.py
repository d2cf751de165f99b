"""Region failover at the size real pipelines reach, live on the reference deployment (issue 27).

    python bench/bench_big_pipeline.py [--sizes 1,10,100,300] [--skip-big]

Starts the reference deployment (ft_harness/airflow/deployment.py: CeleryExecutor with two workers and two
schedulers, PostgreSQL, Redis, a Spark standalone cluster with a Spark Connect server, S3 over HTTP)
with the DAGs of bench/big/ft_big_pipeline.py, then:

1. ``ft_big_pipeline`` (302 task instances: 100 shards of three stages joined pointwise by pipelined
   exchanges, an all-to-all blocking join, a sink), one run with two faults: ``score[7]`` fails once
   (only shard 7's region of 3 tasks may run again) and ``join`` finds ``scored[42]`` lost (backtracking
   rebuilds shard 42's region, then the join runs again). Checked: the run succeeds, exactly those tasks
   ran twice, the sink's rows are right.
2. ``ft_big_region_<n>`` for each size: one region of n tasks whose last task fails once, so all n run
   again; then, for n = 100, a manual restart of the region through the failover page's route.

Per failure it prints: the failed try's end to the restarted region's first tasks queued (the 1 s
backoff included), the provider's REST calls (counted at the proxy in front of the API server, which
only the ``airflow_api`` connection uses), the journal's size, and the failover page's response times
for the run. Writes bench/results/big_pipeline.json.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.partitions import RunRef, S3PartitionStore  # noqa: E402
from airflow_ft_provider.partitions.parquet import read_table  # noqa: E402
from ft_harness.airflow.deployment import ReferenceDeployment  # noqa: E402

RESULTS = REPO / "bench" / "results" / "big_pipeline.json"
DAGS = REPO / "bench" / "big"


def when(stamp: str | None) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else float("nan")


class Bench:
    def __init__(self, deployment: ReferenceDeployment) -> None:
        self.deployment = deployment
        assert deployment.airflow is not None and deployment.rest_api is not None
        self.airflow = deployment.airflow
        self.client = deployment.airflow.client
        self.proxy = deployment.rest_api
        self.web = httpx.Client(base_url=self.airflow.base_url, timeout=60)
        token = self.web.post(
            "/auth/token", json={"username": self.airflow.username, "password": self.airflow.password}
        ).json()["access_token"]
        self.web.headers["Authorization"] = f"Bearer {token}"
        self.stamp = datetime.now().strftime("%H%M%S")
        assert deployment.s3 is not None
        self.store = S3PartitionStore(deployment.s3.client(), deployment.store_url)

    # -- Airflow ------------------------------------------------------------------------------------
    def run(self, dag_id: str, faults: list[dict[str, Any]], timeout: float) -> tuple[str, float]:
        run_id = f"{dag_id}__{self.stamp}"
        t0 = time.monotonic()
        self.client.trigger_dag_run(dag_id, {"ft_faults": faults}, run_id=run_id)
        state = self.client.wait_for_dag_run(dag_id, run_id, timeout=timeout, poll=2)["state"]
        wall = time.monotonic() - t0
        if state != "success":
            raise SystemExit(f"{dag_id}/{run_id} ended {state}:\n{self.airflow.describe_run(dag_id, run_id)}")
        return run_id, wall

    def try_numbers(self, dag_id: str, run_id: str) -> dict[str, int]:
        return {
            ti["task_id"] + (f"[{ti['map_index']}]" if ti["map_index"] >= 0 else ""): ti["try_number"]
            for ti in self.client.task_instances(dag_id, run_id)
        }

    def tries(self, dag_id: str, run_id: str, task: str) -> list[dict[str, Any]]:
        name, _, index = task.partition("[")
        return self.client.task_instance_tries(dag_id, run_id, name, int(index[:-1]) if index else -1)

    def restart_latency(self, dag_id: str, run_id: str, failed: str, first_wave: list[str]) -> dict[str, Any]:
        """From the end of ``failed``'s first try to the second tries of ``first_wave`` scheduled (the
        scheduler found them runnable) and queued (it handed them to Celery: as task slots free up, 8
        here), and the provider's REST calls between the start of that try and the last queue."""
        failed_try = self.tries(dag_id, run_id, failed)[0]
        start, end = when(failed_try["start_date"]), when(failed_try["end_date"])
        again = [self.tries(dag_id, run_id, t)[1] for t in first_wave]
        scheduled = max(when(t["scheduled_when"]) for t in again)
        queued = sorted(when(t["queued_when"]) for t in again)
        calls = [r for r in self.proxy.requests if start <= r.started <= queued[-1]]
        return {
            "failure_to_scheduled_s": round(scheduled - end, 2),
            "failure_to_first_queued_s": round(queued[0] - end, 2),
            "failure_to_all_queued_s": round(queued[-1] - end, 2),
            "rest_calls": len(calls),
            "rest_seconds": round(sum(r.seconds or 0.0 for r in calls), 3),
            "rest_calls_by_kind": dict(Counter(f"{r.method} {kind(r.path)}" for r in calls)),
        }

    # -- S3 and the failover page -------------------------------------------------------------------
    def journal_bytes(self, dag_id: str, run_id: str) -> int:
        prefix = self.store.layout.run_prefix(RunRef(dag_id, run_id)) + "_failover/"
        return sum(info.size for info in self.store.list_objects(prefix).values())

    def page_times(self, dag_id: str, run_id: str, repeat: int = 3) -> dict[str, float]:
        figures = {}
        for name, path in (
            ("api", f"/ft-failover/api/runs/{dag_id}/{run_id}"),
            ("page", f"/ft-failover/runs/{dag_id}/{run_id}"),
        ):
            times = []
            for _ in range(repeat):
                t0 = time.monotonic()
                response = self.web.get(path)
                times.append(time.monotonic() - t0)
                response.raise_for_status()
            figures[f"{name}_s"] = round(statistics.median(times), 3)
            figures[f"{name}_bytes"] = len(response.content)
        return figures

    def restart_by_hand(self, dag_id: str, run_id: str, task: str) -> tuple[float, float, list[str]]:
        """POST the page's restart route; (its response time, its end as a wall-clock time, the tasks it
        cleared)."""
        t0 = time.monotonic()
        response = self.web.post(f"/ft-failover/api/runs/{dag_id}/{run_id}/restart", json={"task": task})
        elapsed = time.monotonic() - t0
        response.raise_for_status()
        return elapsed, time.time(), response.json()["cleared"]


def kind(path: str) -> str:
    """A REST path without its run's identifiers: what kind of call it is."""
    path = path.split("?")[0]
    parts = path.split("/")
    if "dagRuns" in parts:
        return (
            ".../" + "/".join(parts[parts.index("dagRuns") + 2 :])
            if len(parts) > parts.index("dagRuns") + 2
            else "dagRun"
        )
    if "dags" in parts and len(parts) > parts.index("dags") + 2:
        return ".../" + parts[-1]
    return path


def big_pipeline(bench: Bench) -> dict[str, Any]:
    dag = "ft_big_pipeline"
    faults = [{"task": "score[7]", "times": 1}, {"task": "join", "delete": ["scored[42]"]}]
    run_id, wall = bench.run(dag, faults, timeout=1800)
    tries = bench.try_numbers(dag, run_id)
    again = sorted(task for task, n in tries.items() if n > 1)
    shard = lambda i: [f"extract[{i}]", f"clean[{i}]", f"score[{i}]"]  # noqa: E731
    assert len(tries) == 302, len(tries)
    assert again == sorted([*shard(7), *shard(42), "join"]), again
    assert all(tries[t] == 2 for t in again), {t: tries[t] for t in again}
    rows = read_table(bench.store, RunRef(dag, run_id).parse("sunk")).to_pylist()
    assert sorted((r["key"], r["value"]) for r in rows) == [(k, k * 10 + 4) for k in range(400)]
    figures = {
        "tasks": len(tries),
        "wall_s": round(wall, 1),
        "ran_again": again,
        "index_failure": bench.restart_latency(dag, run_id, "score[7]", ["extract[7]"]),
        "join_failure": bench.restart_latency(dag, run_id, "join", ["extract[42]"]),
        "journal_bytes": bench.journal_bytes(dag, run_id),
        **bench.page_times(dag, run_id),
    }
    print(f"ft_big_pipeline: {json.dumps(figures, indent=1)}", flush=True)
    return figures


def region(bench: Bench, size: int) -> dict[str, Any]:
    dag = f"ft_big_region_{size}"
    run_id, wall = bench.run(dag, [{"task": "gather", "times": 1}], timeout=1800)
    tries = bench.try_numbers(dag, run_id)
    assert len(tries) == size and set(tries.values()) == {2}, tries
    first_wave = [t for t in tries if t != "gather"] or ["gather"]
    figures: dict[str, Any] = {
        "tasks": size,
        "wall_s": round(wall, 1),
        **bench.restart_latency(dag, run_id, "gather", first_wave),
        "journal_bytes": bench.journal_bytes(dag, run_id),
        **bench.page_times(dag, run_id),
    }
    print(f"{dag}: {json.dumps(figures, indent=1)}", flush=True)
    if size == 100:
        figures["manual_restart"] = manual_restart(bench, dag, run_id, first_wave)
        print(f"{dag}, restarted by hand: {json.dumps(figures['manual_restart'], indent=1)}", flush=True)
    return figures


def manual_restart(bench: Bench, dag: str, run_id: str, first_wave: list[str]) -> dict[str, Any]:
    """The region restarted from the failover page's route after the run succeeded."""
    calls_before = len(bench.proxy.requests)
    elapsed, done, restarted = bench.restart_by_hand(dag, run_id, "gather")
    assert len(restarted) == 100, restarted  # every task of the region had run: all cleared
    state = bench.client.wait_for_dag_run(dag, run_id, timeout=1800, poll=2, states=("success", "failed"))
    while state["state"] != "success" or set(bench.try_numbers(dag, run_id).values()) != {3}:
        if state["state"] == "failed":
            raise SystemExit(bench.airflow.describe_run(dag, run_id))
        time.sleep(2)
        state = bench.client.get_dag_run(dag, run_id)
    again = [bench.tries(dag, run_id, t)[2] for t in first_wave]
    started = done - elapsed
    return {
        "route_s": round(elapsed, 2),
        "route_to_scheduled_s": round(max(when(t["scheduled_when"]) for t in again) - started, 2),
        "route_to_first_queued_s": round(min(when(t["queued_when"]) for t in again) - started, 2),
        "route_to_all_queued_s": round(max(when(t["queued_when"]) for t in again) - started, 2),
        # the page clears in the API server, as the user: no call goes through the provider's REST client
        "provider_rest_calls": len(bench.proxy.requests) - calls_before,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100,300", help="region sizes, from 1 10 100 300")
    parser.add_argument(
        "--skip-big", action="store_true", help="only the region sizes (keeps the recorded big pipeline's)"
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the deployment on a kill too
    sizes = [int(s) for s in args.sizes.split(",") if s]
    # --skip-big keeps the big pipeline's figures of an earlier run (bench/results/big_pipeline.json)
    kept = json.loads(RESULTS.read_text()) if args.skip_big and RESULTS.exists() else {}
    results: dict[str, Any] = {"regions": {}, **{k: v for k, v in kept.items() if k == "big_pipeline"}}
    with ReferenceDeployment([DAGS]) as deployment:
        print(f"deployment up in {deployment.started_in:.0f} s", flush=True)
        bench = Bench(deployment)
        dags = ([] if args.skip_big else ["ft_big_pipeline"]) + [f"ft_big_region_{n}" for n in sizes]
        bench.airflow.wait_for_dags(dags, timeout=300)
        if not args.skip_big:
            results["big_pipeline"] = big_pipeline(bench)
        for size in sizes:
            results["regions"][str(size)] = region(bench, size)
    print("\nregion | failure -> scheduled / first queued / all queued (1 s backoff) | REST | journal | page")
    for size, f in results["regions"].items():
        print(
            f"{size:>6} | {f['failure_to_scheduled_s']:.2f} / {f['failure_to_first_queued_s']:.2f} / "
            f"{f['failure_to_all_queued_s']:.2f} s | {f['rest_calls']} calls, {f['rest_seconds']:.2f} s | "
            f"{f['journal_bytes'] / 1024:.1f} KB | {f['api_s']:.3f} s"
        )
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
