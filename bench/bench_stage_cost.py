"""Per-stage fixed cost in a live Airflow: a trivial stage on Spark Connect vs as its own spark-submit.

A trivial stage (one row out) end to end -- task start to task end, as Airflow records it: the task
process, resolving inputs, the Spark work, the commit to S3 -- minus a no-op Python task's duration in
the same Airflow (what Airflow itself costs per task). The Spark Connect client is preloaded in the
executor's workers (``[ft_provider] preload_stage_clients``, as the live fixture does) unless
--no-preload. The three DAGs (bench/stage_cost/dags.py) run
one at a time, alternating, --runs times each; the medians are printed and written to
bench/results/stage_cost.json. The task processes' CPU time is not in Airflow's record: the figure is
wall time.

    python bench/bench_stage_cost.py --runs 7
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

from bench.live_bench import live_bench  # noqa: E402

DAGS = {
    "noop": ("bench_cost_noop", "noop"),
    "connect": ("bench_cost_connect", "trivial"),
    "submit": ("bench_cost_submit", "trivial"),
}


def task_seconds(client, dag_id: str, run_id: str, task_id: str) -> float:
    ti = client.task_instance(dag_id, run_id, task_id)
    return (datetime.fromisoformat(ti["end_date"]) - datetime.fromisoformat(ti["start_date"])).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--no-preload",
        action="store_true",
        help="[ft_provider] preload_stage_clients off: every Connect try imports the client",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="default bench/results/stage_cost.json (stage_cost_no_preload.json with --no-preload)",
    )
    args = parser.parse_args()
    name = "stage_cost_no_preload.json" if args.no_preload else "stage_cost.json"
    args.output = args.output or REPO / "bench" / "results" / name
    env = {
        "FT_BENCH_COST_APPS": str(REPO / "bench" / "stage_cost"),
        "AIRFLOW__FT_PROVIDER__PRELOAD_STAGE_CLIENTS": str(not args.no_preload),
    }
    with live_bench("ft-bench-cost", [REPO / "bench" / "stage_cost"], env=env) as live:
        airflow = live.airflow
        client = airflow.client
        airflow.wait_for_dags([dag for dag, _ in DAGS.values()], timeout=180)
        seconds: dict[str, list[float]] = {name: [] for name in DAGS}
        for n in range(args.runs + 1):  # the first round warms up (imports, caches, the server's JIT)
            for name, (dag_id, task_id) in DAGS.items():
                run_id = client.trigger_dag_run(dag_id, run_id=f"cost_{name}_{n}")["dag_run_id"]
                final = client.wait_for_dag_run(dag_id, run_id, timeout=600)
                assert final["state"] == "success", airflow.describe_run(dag_id, run_id)
                if n:
                    seconds[name].append(task_seconds(client, dag_id, run_id, task_id))
        medians = {name: statistics.median(values) for name, values in seconds.items()}
        result = {
            "runs": args.runs,
            "preload_stage_clients": not args.no_preload,
            "task_seconds": {
                name: {"median": round(medians[name], 2), "all": [round(v, 2) for v in values]}
                for name, values in seconds.items()
            },
            "fixed_cost_s": {
                "connect": round(medians["connect"] - medians["noop"], 2),
                "submit": round(medians["submit"] - medians["noop"], 2),
            },
        }
        print(f"no-op Python task:            {medians['noop']:.2f} s (median of {args.runs})")
        print(
            f"trivial stage, Spark Connect: {medians['connect']:.2f} s -> fixed cost "
            f"{result['fixed_cost_s']['connect']:.2f} s"
        )
        print(
            f"trivial stage, spark-submit:  {medians['submit']:.2f} s -> fixed cost "
            f"{result['fixed_cost_s']['submit']:.2f} s"
        )
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2))
        print(f"written to {args.output}")


if __name__ == "__main__":
    main()
