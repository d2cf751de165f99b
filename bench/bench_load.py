"""Load: twenty runs of a 30-task pipeline at once on the reference deployment, faults in a quarter.

    python bench/bench_load.py [--runs 20] [--faulty 5]

Starts the reference deployment (ft_harness/airflow/deployment.py: CeleryExecutor with two workers and two
schedulers, PostgreSQL, Redis, a Spark standalone cluster with a Spark Connect server, S3 over HTTP
through a counting proxy) with bench/load/ft_load_pipeline.py, triggers every run at once, and in runs
0 .. faulty-1 fails ``clean[i]`` once (i = the run's number). Checked (the benchmark fails otherwise):
every run succeeds; a faulty run ran exactly its shard's region (extract[i], clean[i]) twice and the
rest once, the others everything once; each faulty run's journal has one failover decision and the
others none; every shard's output is exact.

Per failure it prints: the failed try's end to the restarted region's first task queued again (the
strategy's 1 s delay included; with twenty runs queueing for 8 task slots, most of it is the wait for a
slot), and the S3 and REST requests that name the run, from the failed try's start to that queueing (S3
at the proxy in front of the endpoint: Airflow workers and Spark executors; REST at the proxy only the
provider's ``airflow_api`` connection uses). p50/p95 over the failures. Writes bench/results/load.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ft_harness.data.journal_records import stored_events

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.partitions import RunRef, S3PartitionStore  # noqa: E402
from airflow_ft_provider.partitions.parquet import read_table  # noqa: E402
from airflow_ft_provider.recovery.journal import RecoveryJournal  # noqa: E402
from ft_harness.airflow.deployment import ReferenceDeployment  # noqa: E402
from ft_harness.services.s3_server import start_moto_server, stop_moto_server  # noqa: E402
from ft_harness.services.tcp_proxy import PausableProxy  # noqa: E402

RESULTS = REPO / "bench" / "results" / "load.json"
DAGS = REPO / "bench" / "load"
DAG = "ft_load_pipeline"
SHARDS = 10


def when(stamp: str | None) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else float("nan")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def check_run(
    deployment: ReferenceDeployment, store: S3PartitionStore, run_id: str, shard: int | None
) -> None:
    """The run's tries, decisions and output are what a failure-free run (or one failed region) gives."""
    client = deployment.airflow.client
    tries = {
        f"{ti['task_id']}[{ti['map_index']}]": ti["try_number"] for ti in client.task_instances(DAG, run_id)
    }
    twice = {f"extract[{shard}]", f"clean[{shard}]"} if shard is not None else set()
    expected = {
        f"{t}[{i}]": 2 if f"{t}[{i}]" in twice else 1
        for t in ("extract", "clean", "score")
        for i in range(SHARDS)
    }
    assert tries == expected, (run_id, {k: v for k, v in tries.items() if v != expected.get(k)})
    decisions = [
        e for e in stored_events(RecoveryJournal(store, RunRef(DAG, run_id))) if e["kind"] == "failover"
    ]
    assert [e["task"] for e in decisions] == ([f"clean[{shard}]"] if shard is not None else []), decisions
    for i in range(SHARDS):
        rows = read_table(store, RunRef(DAG, run_id).parse(f"scored[{i}]")).to_pylist()
        assert sorted((r["key"], r["value"]) for r in rows) == [
            (k, k * 10 + 2) for k in range(i, 100, SHARDS)
        ]


def failure_figures(
    deployment: ReferenceDeployment, s3: PausableProxy, run_id: str, shard: int
) -> dict[str, Any]:
    client = deployment.airflow.client
    failed = client.task_instance_tries(DAG, run_id, "clean", shard)[0]
    again = client.task_instance_tries(DAG, run_id, "extract", shard)[1]
    start, end, queued = when(failed["start_date"]), when(failed["end_date"]), when(again["queued_when"])
    in_window = lambda requests: [r for r in requests if start <= r.started <= queued and run_id in r.path]  # noqa: E731
    return {
        "failure_to_region_queued_s": round(queued - end, 2),
        "s3_requests": len(in_window(s3.requests)),
        "rest_requests": len(in_window(deployment.rest_api.requests)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--faulty", type=int, default=5, help="runs 0 .. N-1 fail clean[run number] once")
    parser.add_argument(
        "--python-daemon",
        action="store_true",
        help="leave spark.python.use.daemon on in the Connect server (Spark's default): its Python "
        "processes then grow with every session and twenty runs exhaust this machine's memory",
    )
    args = parser.parse_args()
    connect_conf = {} if args.python_daemon else {"spark.python.use.daemon": "false"}
    assert args.faulty <= min(args.runs, SHARDS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the deployment on a kill too
    moto = start_moto_server()
    counted = PausableProxy("127.0.0.1", int(moto.url.rsplit(":", 1)[1]))
    try:
        with ReferenceDeployment(
            [DAGS], s3=dataclasses.replace(moto, url=counted.url), connect_conf=connect_conf
        ) as deployment:
            print(f"deployment up in {deployment.started_in:.0f} s", flush=True)
            airflow = deployment.airflow
            airflow.wait_for_dags([DAG], timeout=300)
            store = S3PartitionStore(moto.client(), deployment.store_url)
            stamp = datetime.now().strftime("%H%M%S")
            runs = {f"load_{n:02d}__{stamp}": (n if n < args.faulty else None) for n in range(args.runs)}
            t0 = time.monotonic()
            for run_id, shard in runs.items():
                faults = [{"task": f"clean[{shard}]", "times": 1}] if shard is not None else []
                airflow.client.trigger_dag_run(DAG, {"ft_faults": faults}, run_id=run_id)
            states = {
                run_id: airflow.client.wait_for_dag_run(DAG, run_id, timeout=3600, poll=5)["state"]
                for run_id in runs
            }
            wall = time.monotonic() - t0
            failed = {r: s for r, s in states.items() if s != "success"}
            if failed:
                raise SystemExit(
                    f"runs not successful: {failed}\n"
                    + "\n".join(airflow.describe_run(DAG, r) for r in failed)
                )
            for run_id, shard in runs.items():
                check_run(deployment, store, run_id, shard)
            per_failure = {
                run_id: failure_figures(deployment, counted, run_id, shard)
                for run_id, shard in runs.items()
                if shard is not None
            }
    finally:
        counted.close()
        stop_moto_server(moto)
    latencies = [f["failure_to_region_queued_s"] for f in per_failure.values()]
    results = {
        "connect_conf": connect_conf,
        "runs": args.runs,
        "tasks": args.runs * 3 * SHARDS,
        "faulty_runs": args.faulty,
        "wall_s": round(wall, 1),
        "restart_latency_p50_s": percentile(latencies, 0.5),
        "restart_latency_p95_s": percentile(latencies, 0.95),
        "s3_requests_per_failure_median": statistics.median(f["s3_requests"] for f in per_failure.values()),
        "rest_requests_per_failure_median": statistics.median(
            f["rest_requests"] for f in per_failure.values()
        ),
        "per_failure": per_failure,
    }
    print(json.dumps(results, indent=1))
    print(
        f"\n{args.runs} runs x {3 * SHARDS} tasks at once, {args.faulty} with a failure: all correct, one "
        f"decision per failure; {wall:.0f} s in all; restart latency p50 "
        f"{results['restart_latency_p50_s']:.1f} s, p95 {results['restart_latency_p95_s']:.1f} s; per "
        f"failure {results['s3_requests_per_failure_median']} S3 and "
        f"{results['rest_requests_per_failure_median']} REST requests (medians)"
    )
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
