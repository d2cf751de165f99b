"""Failover latency next to Airflow's own retry latency, in a real Airflow (LocalExecutor, SQLite).

Failover latency: from the end of the failed try of C (seed 002: A -> B -> {C, D}, C fails once)
to the start of its restarted try, minus the restart strategy's backoff (fixed-delay 2 s).
Airflow's latency: the same gap for a plain task with retries=1, retry_delay=0.
Each is measured over --runs runs; prints the figures and writes bench/results/failover_latency.json.

    python bench/bench_failover_latency.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ft_harness.airflow.live_airflow import LiveAirflow  # noqa: E402
from ft_harness.airflow.live_environment import pipeline_environment  # noqa: E402
from ft_harness.services.s3_server import start_moto_server, stop_moto_server  # noqa: E402

BACKOFF = 2.0  # restart-strategy.fixed-delay.delay of ft_e2e_seed002


def gap(client, dag_id: str, run_id: str, task_id: str) -> float:
    tries = client.task_instance_tries(dag_id, run_id, task_id)
    return (
        datetime.fromisoformat(tries[1]["start_date"]) - datetime.fromisoformat(tries[0]["end_date"])
    ).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "failover_latency.json")
    args = parser.parse_args()
    s3 = start_moto_server()
    airflow = None
    try:
        bucket = "ft-bench-latency"
        s3.client().create_bucket(Bucket=bucket)
        airflow = LiveAirflow(
            [
                REPO / "tests" / "e2e" / "dags" / "ft_failover_scenarios.py",
                REPO / "bench" / "dags" / "plain_retry.py",
            ],
            env=pipeline_environment(s3, f"s3://{bucket}/pipelines/"),
        ).start()
        client = airflow.client
        airflow.wait_for_dags(["ft_e2e_seed002", "ft_bench_plain_retry"], timeout=120)
        failover, plain = [], []
        for n in range(args.runs):
            runs = {
                "failover": client.trigger_dag_run(
                    "ft_e2e_seed002",
                    {"ft_faults": [{"task": "C", "times": 1}]},
                    run_id=f"latency_failover_{n}",
                )["dag_run_id"],
                "plain": client.trigger_dag_run("ft_bench_plain_retry", run_id=f"latency_plain_{n}")[
                    "dag_run_id"
                ],
            }
            client.wait_for_dag_run("ft_e2e_seed002", runs["failover"], timeout=900)
            client.wait_for_dag_run("ft_bench_plain_retry", runs["plain"], timeout=300)
            failover.append(gap(client, "ft_e2e_seed002", runs["failover"], "C") - BACKOFF)
            plain.append(gap(client, "ft_bench_plain_retry", runs["plain"], "flaky"))
        result = {
            "runs": args.runs,
            "failover_latency_s": {"median": statistics.median(failover), "all": failover},
            "airflow_retry_latency_s": {"median": statistics.median(plain), "all": plain},
            "difference_s": statistics.median(failover) - statistics.median(plain),
        }
        print(
            f"failover latency (minus {BACKOFF:g} s backoff): "
            f"median {result['failover_latency_s']['median']:.2f} s "
            f"{[round(x, 2) for x in failover]}"
        )
        print(
            f"Airflow's own retry latency:              "
            f"median {result['airflow_retry_latency_s']['median']:.2f} s "
            f"{[round(x, 2) for x in plain]}"
        )
        print(f"difference: {result['difference_s']:+.2f} s (target: within 2 s)")
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2))
    finally:
        if airflow is not None:
            airflow.stop()
        stop_moto_server(s3)


if __name__ == "__main__":
    main()
