"""Output reuse: what a restarted producer region costs its consumers, with reuse and without, and what
computing the row checksum costs a write.

    python bench/bench_output_reuse.py --runs 3        (about 10 minutes on 2 cores)

1. Pipeline (bench/reuse/dags.py) in a live Airflow, every stage a session on a local Spark Connect
   server: ``extract`` (deterministic, --rows rows) feeds four aggregations. After a failure-free run,
   ``extract``'s region is restarted by hand (``airflow-ft restart-region``), which reschedules the four
   consumers. Measured: wall time from the restart to the run's success, and the seconds of the
   consumers' new tries (Airflow's record), with reuse (the default) and with ``reuse="off"``,
   alternating, --runs rounds each after a warm-up round.
2. Write cost: --rows rows written to Parquet on the same server, with and without the observed row
   checksum (``spark/content.py``), alternating, medians.

Figures are printed and written to bench/results/output_reuse.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.live_bench import live_bench  # noqa: E402

CONSUMERS = [f"agg_{i}" for i in range(1, 5)]
VARIANTS = {"reuse": "bench_reuse_on", "no_reuse": "bench_reuse_off"}


def seconds(ti: dict) -> float:
    return (datetime.fromisoformat(ti["end_date"]) - datetime.fromisoformat(ti["start_date"])).total_seconds()


def restart_round(live, dag_id: str, n: int) -> dict:
    client, airflow = live.airflow.client, live.airflow
    run_id = client.trigger_dag_run(dag_id, {}, run_id=f"reuse_{n}_{datetime.now():%H%M%S%f}")["dag_run_id"]
    assert client.wait_for_dag_run(dag_id, run_id, timeout=1200)["state"] == "success"
    started = time.monotonic()
    restart = airflow.provider_cli(
        "restart-region", "--dag-id", dag_id, "--run-id", run_id, "--task", "extract"
    )
    assert restart.returncode == 0, restart.stdout + restart.stderr
    for task in CONSUMERS:
        client.wait_for_task_instance(
            dag_id,
            run_id,
            task,
            predicate=lambda ti: ti["try_number"] > 1 and ti["state"] == "success",
            timeout=1200,
        )
    wall = time.monotonic() - started
    tis = {ti["task_id"]: ti for ti in client.task_instances(dag_id, run_id)}
    return {
        "wall_s": round(wall, 2),
        "consumers_s": round(sum(seconds(tis[t]) for t in CONSUMERS), 2),
        "extract_s": round(seconds(tis["extract"]), 2),
    }


def write_cost(url: str, rows: int, runs: int) -> dict:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from airflow_ft_provider.spark.content import ContentObserver

    spark = SparkSession.builder.remote(url).create()
    try:
        df = spark.range(rows).select(
            F.col("id").alias("order_id"),
            (F.col("id") % 1000).alias("customer"),
            (F.col("id") % 97 * 1.5).alias("amount"),
            F.concat(F.lit("c-"), (F.col("id") % 5000).cast("string")).alias("name"),
        )
        times: dict[str, list[float]] = {"plain": [], "checksum": []}
        with tempfile.TemporaryDirectory(prefix="ft-bench-reuse-") as out:
            for n in range(runs + 1):  # the first round warms up
                for name in times:
                    started = time.perf_counter()
                    target = df if name == "plain" else ContentObserver(df).observed
                    target.write.parquet(f"{out}/{name}-{n}")
                    if n:
                        times[name].append(time.perf_counter() - started)
        medians = {name: statistics.median(v) for name, v in times.items()}
        return {
            "rows": rows,
            "median_s": {k: round(v, 3) for k, v in medians.items()},
            "all_s": {k: [round(x, 3) for x in v] for k, v in times.items()},
            "overhead": round(medians["checksum"] / medians["plain"] - 1, 3),
        }
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "output_reuse.json")
    args = parser.parse_args()
    env = {"FT_BENCH_REUSE_ROWS": str(args.rows)}
    with live_bench("ft-bench-reuse", [REPO / "bench" / "reuse"], env=env) as live:
        live.airflow.wait_for_dags(list(VARIANTS.values()), timeout=180)
        rounds: dict[str, list[dict]] = {name: [] for name in VARIANTS}
        for n in range(args.runs + 1):
            for name, dag_id in VARIANTS.items():
                measured = restart_round(live, dag_id, n)
                print(f"round {n} {name}: {measured}", flush=True)
                if n:
                    rounds[name].append(measured)
        writes = write_cost(live.server.url, args.rows, args.runs)
    median = {
        name: {key: statistics.median(r[key] for r in values) for key in values[0]}
        for name, values in rounds.items()
    }
    result = {
        "rows": args.rows,
        "runs": args.runs,
        "restart_extract": {"median": median, "all": rounds},
        "ratios": {
            "wall": round(median["reuse"]["wall_s"] / median["no_reuse"]["wall_s"], 2),
            "consumers": round(median["reuse"]["consumers_s"] / median["no_reuse"]["consumers_s"], 2),
        },
        "write_cost": writes,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    r, o = median["reuse"], median["no_reuse"]
    print(
        f"\nrestart of extract, medians of {args.runs}: wall {r['wall_s']:.1f} s with reuse vs"
        f" {o['wall_s']:.1f} s without ({result['ratios']['wall']}x); the consumers' new tries"
        f" {r['consumers_s']:.1f} s vs"
        f" {o['consumers_s']:.1f} s ({result['ratios']['consumers']}x)"
    )
    print(
        f"write of {args.rows} rows: {writes['median_s']['checksum']} s with the row checksum vs"
        f" {writes['median_s']['plain']} s without (+{writes['overhead'] * 100:.1f} %)"
    )


if __name__ == "__main__":
    main()
