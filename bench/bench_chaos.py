"""Chaos, long mode: many seeded runs of the orders ETL example with random faults, counted.

    python bench/bench_chaos.py --runs 12 --seed 7 [--concurrency 3] [--persistent 0.25] [--server-loss 0.25]

Faults per run (ft_harness/chaos/chaos.py): 1-3 of exceptions before or inside Spark, SIGKILL of the task
process, deleted or truncated partition objects, and S3 cut off for a few seconds (a pausable proxy in
front of the moto server); with --persistent p, a run also gets, with probability p, a stage that fails
on every try (the restart strategy must give up: suppressed, never recovered); stages run on a Spark
Connect server, and with --server-loss p a run also loses the server (killed and restarted) with
probability p. Prints the counts -- faults injected, recoveries, suppressed runs, data
mismatches, damaged partitions, unexplained failures (the last three must be 0) -- and writes
bench/results/chaos.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.partitions import S3PartitionStore  # noqa: E402
from ft_harness.airflow.live_airflow import EXAMPLE_DAGS_DIR, LiveAirflow  # noqa: E402
from ft_harness.airflow.live_environment import pipeline_environment  # noqa: E402
from ft_harness.chaos.chaos import count, make_plan, run_plans  # noqa: E402
from ft_harness.services.s3_server import start_moto_server, stop_moto_server  # noqa: E402
from ft_harness.services.spark_connect import SparkConnectServer  # noqa: E402
from ft_harness.services.tcp_proxy import PausableProxy  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--concurrency", type=int, default=3, help="runs in flight at once")
    parser.add_argument(
        "--persistent",
        type=float,
        default=0.0,
        help="probability that a run also gets a stage failing on every try",
    )
    parser.add_argument(
        "--server-loss",
        type=float,
        default=0.0,
        help="probability that a batch of runs also loses the Spark Connect server mid-run",
    )
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "chaos.json")
    args = parser.parse_args()
    s3 = start_moto_server()
    host, port = s3.url.removeprefix("http://").split(":")
    proxy, airflow = PausableProxy(host, int(port)), None
    server = SparkConnectServer().start()
    try:
        bucket = "ft-bench-chaos"
        s3.client().create_bucket(Bucket=bucket)
        store_url = f"s3://{bucket}/pipelines/"
        env = pipeline_environment(dataclasses.replace(s3, url=proxy.url), store_url, server)
        airflow = LiveAirflow([EXAMPLE_DAGS_DIR], env=env).start()
        store = S3PartitionStore(s3.client(), store_url)
        rng, verdicts, started = random.Random(args.seed), [], time.monotonic()
        for batch in range(0, args.runs, args.concurrency):
            plans = [
                make_plan(rng, outages=True, persistent=args.persistent, server_losses=args.server_loss)
                for _ in range(min(args.concurrency, args.runs - batch))
            ]
            for verdict in run_plans(
                airflow, store, plans, proxy=proxy, spark_connect=server, prefix=f"chaos{batch}"
            ):
                verdicts.append(verdict)
                print(f"{verdict.run_id}: {verdict.outcome:10} {verdict.plan.describe()}", flush=True)
                if verdict.outcome not in ("recovered", "suppressed"):
                    print(f"    {verdict.detail[:2000]}")
        figures = count(verdicts) | {
            "seed": args.seed,
            "persistent_probability": args.persistent,
            "server_loss_probability": args.server_loss,
            "wall_s": round(time.monotonic() - started),
        }
        print(json.dumps(figures, indent=2))
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(
            json.dumps(
                {
                    "figures": figures,
                    "runs": [
                        {
                            "run_id": v.run_id,
                            "outcome": v.outcome,
                            "faults": v.plan.faults,
                            "outage_after": v.plan.outage_after,
                            "outage_seconds": v.plan.outage_seconds,
                            "server_loss_after": v.plan.server_loss_after,
                            "tries": v.tries,
                            "detail": v.detail[:500],
                        }
                        for v in verdicts
                    ],
                },
                indent=2,
            )
        )
    finally:
        if airflow is not None:
            airflow.stop()
        proxy.close()
        server.stop()
        stop_moto_server(s3)


if __name__ == "__main__":
    main()
