"""Partition life cycle: does the bucket stay bounded over many runs with failures?

    python bench/bench_bucket_lifecycle.py [--runs 20] [--batch 4] [--seed 11] [--retention "30 s"]

Runs the orders ETL example (``ft_example_orders_etl``) ``--runs`` times in a live Airflow (LocalExecutor,
stages on a local Spark Connect server, the moto S3 endpoint), ``--batch`` runs at a time, each with
1-3 random faults of the chaos plans (exceptions, SIGKILL, deleted or truncated partitions: failed
commits, superseded attempts and restarted regions leave data behind). After each batch it counts the
bucket's objects and bytes, runs ``airflow-ft gc`` as a deployment would on its schedule (with
``partition_store_retention`` = ``--retention`` and ``partition_store_orphan_grace`` = ``--orphan-grace``)
and counts again. Prints a table and the bound, writes bench/results/bucket_lifecycle.json.

What "bounded" means here: after each sweep the bucket holds the runs still inside their retention
(and the journal and run markers of released ones, a few hundred bytes each), whatever the number of
runs so far; without the sweeps it grows by every run's data, failed attempts included.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.partitions import S3PartitionStore  # noqa: E402
from bench.live_bench import live_bench  # noqa: E402
from ft_harness.airflow.live_airflow import EXAMPLE_DAGS_DIR  # noqa: E402
from ft_harness.chaos.chaos import make_plan, run_plans  # noqa: E402


def bucket_size(client, bucket: str) -> tuple[int, int]:
    objects = size = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", ()):
            objects, size = objects + 1, size + item["Size"]
    return objects, size


def sweep(env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "airflow_ft_provider.cli", "gc"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"airflow-ft gc exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--retention", default="30 s")
    parser.add_argument("--orphan-grace", default="30 s")
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "bucket_lifecycle.json")
    args = parser.parse_args()
    bucket = "ft-bench-lifecycle"
    with live_bench(bucket, [EXAMPLE_DAGS_DIR]) as bench:
        client = bench.s3.client()
        store = S3PartitionStore(client, bench.store_url)
        gc_env = {
            **bench.airflow.environment(),
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "AIRFLOW__FT_PROVIDER__PARTITION_STORE_RETENTION": args.retention,
            "AIRFLOW__FT_PROVIDER__PARTITION_STORE_ORPHAN_GRACE": args.orphan_grace,
        }
        rng, rows, outcomes, written, findings = random.Random(args.seed), [], {}, 0, []
        started = time.monotonic()
        for first in range(0, args.runs, args.batch):
            plans = [make_plan(rng, outages=False) for _ in range(min(args.batch, args.runs - first))]
            for verdict in run_plans(bench.airflow, store, plans, prefix=f"life{first}"):
                outcomes[verdict.outcome] = outcomes.get(verdict.outcome, 0) + 1
                if verdict.outcome not in ("recovered", "suppressed"):
                    findings.append(
                        {
                            "run_id": verdict.run_id,
                            "outcome": verdict.outcome,
                            "faults": verdict.plan.faults,
                            "tries": verdict.tries,
                            "detail": verdict.detail,
                        }
                    )
                    print(
                        f"{verdict.run_id}: {verdict.outcome} {verdict.plan.describe()}"
                        f"\n{verdict.detail[:4000]}",
                        flush=True,
                    )
            before = bucket_size(client, bucket)
            time.sleep(1)
            report = sweep(gc_env)
            after = bucket_size(client, bucket)
            written += before[1] - (rows[-1]["after_bytes"] if rows else 0)
            rows.append(
                {
                    "runs": first + len(plans),
                    "before_objects": before[0],
                    "before_bytes": before[1],
                    "after_objects": after[0],
                    "after_bytes": after[1],
                    "written_bytes": written,
                    "gc": report,
                    "t_s": round(time.monotonic() - started),
                }
            )
            print(
                f"after {rows[-1]['runs']:3} runs: {before[0]:5} objects {before[1] / 1e6:7.2f} MB -> gc -> "
                f"{after[0]:5} objects {after[1] / 1e6:7.2f} MB"
                f"   (written so far {written / 1e6:7.2f} MB; {report})",
                flush=True,
            )
    kept = [r["after_bytes"] for r in rows]
    figures = {
        "runs": args.runs,
        "batch": args.batch,
        "retention": args.retention,
        "orphan_grace": args.orphan_grace,
        "outcomes": outcomes,
        "written_mb": round(written / 1e6, 2),
        "max_kept_mb": round(max(kept) / 1e6, 2),
        "final_kept_mb": round(kept[-1] / 1e6, 2),
        "max_kept_objects": max(r["after_objects"] for r in rows),
        "final_kept_objects": rows[-1]["after_objects"],
        "wall_s": round(time.monotonic() - started),
    }
    print(json.dumps(figures, indent=2))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"figures": figures, "sweeps": rows, "findings": findings}, indent=2))


if __name__ == "__main__":
    main()
