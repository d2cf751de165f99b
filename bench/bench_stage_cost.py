"""Per-stage fixed cost in a live Airflow: a trivial stage on Spark Connect vs as its own spark-submit.

A trivial stage (one row out) end to end -- task start to task end, as Airflow records it: the task
process, resolving inputs, the Spark work, the commit to S3 -- minus a no-op Python task's duration in
the same Airflow (what Airflow itself costs per task). Airflow runs with its defaults ([core]
lazy_load_plugins = True included); the scheduler preloads the Spark Connect client before its
executor's workers fork (``[ft_provider] preload_stage_clients``, on by default) unless --no-preload.
The three DAGs (bench/stage_cost/dags.py) run one at a time, alternating (the Connect stage twice in
a row: the second finds its session's Python workers as a pipeline's next stage does), --runs times each; the
medians are printed and written to bench/results/stage_cost.json, with each stage's phases as its log
says them (``stage_try/phases.py``; "outside_try" is the task's time its try did not see), and the
CPU each run made the machine spend, by part and by process (``cpu_sampler.py``: Airflow's record has
no CPU time).

    python bench/bench_stage_cost.py --runs 7
    python bench/bench_stage_cost.py --runs 5 --celery   # on the reference deployment (Celery)

With ``--celery`` the same DAGs run on the reference deployment (``ft_harness/airflow/deployment.py``:
CeleryExecutor with two workers and two schedulers, PostgreSQL, Redis, a Spark standalone cluster
with its Connect server on a Spark host of its own), with Airflow's defaults too: what a user of a
distributed Airflow gets. Written to bench/results/stage_cost_celery.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.stage_try.phases import PHASES, parse_summary  # noqa: E402
from bench.cpu_sampler import CpuSampler  # noqa: E402
from bench.live_bench import live_bench  # noqa: E402

DAGS = {  # run in this order each round
    "noop": ("bench_cost_noop", "noop"),
    "connect": ("bench_cost_connect", "trivial"),
    # the same stage again at once: its session's Python workers as a pipeline's next stage finds
    # them (Spark closes idle ones after a minute; each round's spark-submit takes longer on a cluster)
    "connect_again": ("bench_cost_connect", "trivial"),
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
        "--celery", action="store_true", help="on the reference deployment (CeleryExecutor, a Spark cluster)"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="default bench/results/stage_cost.json (stage_cost_no_preload.json with --no-preload)",
    )
    args = parser.parse_args()
    name = "stage_cost_no_preload.json" if args.no_preload else "stage_cost.json"
    name = name.replace(".json", "_celery.json") if args.celery else name
    args.output = args.output or REPO / "bench" / "results" / name
    env = {
        "FT_BENCH_COST_APPS": str(REPO / "bench" / "stage_cost"),
        "AIRFLOW__FT_PROVIDER__PRELOAD_STAGE_CLIENTS": str(not args.no_preload),
    }
    if args.celery:
        from ft_harness.airflow.deployment import ReferenceDeployment

        deployment: Any = ReferenceDeployment([REPO / "bench" / "stage_cost"], env=env)
    else:
        deployment = live_bench("ft-bench-cost", [REPO / "bench" / "stage_cost"], env=env)
    with deployment as live:
        airflow = live.airflow
        client = airflow.client
        airflow.wait_for_dags([dag for dag, _ in DAGS.values()], timeout=180)
        seconds: dict[str, list[float]] = {name: [] for name in DAGS}
        phases: dict[str, list[dict[str, float]]] = {"connect": [], "connect_again": [], "submit": []}
        cpu: dict[str, list[dict[str, float]]] = {name: [] for name in DAGS}  # core-s per run, by part
        titles: dict[str, dict[str, float]] = {name: {} for name in DAGS}  # mean core-s per run, by process
        for n in range(args.runs + 1):  # the first round warms up (imports, caches, the server's JIT)
            for name, (dag_id, task_id) in DAGS.items():
                with CpuSampler() as sampled:
                    run_id = client.trigger_dag_run(dag_id, run_id=f"cost_{name}_{n}")["dag_run_id"]
                    final = client.wait_for_dag_run(dag_id, run_id, timeout=600)
                assert final["state"] == "success", airflow.describe_run(dag_id, run_id)
                if n:
                    seconds[name].append(task_seconds(client, dag_id, run_id, task_id))
                    cpu[name].append(dict(sampled.seconds))
                    for title, spent in sampled.by_command.items():
                        titles[name][title] = titles[name].get(title, 0.0) + spent / args.runs
                    if name in phases:  # where the stage's task spent its time, by its own log
                        said = parse_summary(airflow.task_log(dag_id, run_id, task_id, 1)) or {}
                        phases[name].append({**said, "outside_try": seconds[name][-1] - said.get("total", 0)})
        medians = {name: statistics.median(values) for name, values in seconds.items()}
        result = {
            "runs": args.runs,
            "executor": "CeleryExecutor (the reference deployment)" if args.celery else "LocalExecutor",
            "preload_stage_clients": not args.no_preload,
            "task_seconds": {
                name: {"median": round(medians[name], 2), "all": [round(v, 2) for v in values]}
                for name, values in seconds.items()
            },
            "fixed_cost_s": {
                name: round(medians[name] - medians["noop"], 2)
                for name in ("connect", "connect_again", "submit")
            },
            "core_s_per_run": {  # medians by part (bench/cpu_sampler.py): trigger to the run's end
                name: {part: round(statistics.median(c[part] for c in found), 2) for part in found[0]}
                for name, found in cpu.items()
            },
            "core_s_per_run_by_process": {
                name: {title: round(v, 2) for title, v in sorted(found.items(), key=lambda i: -i[1])[:10]}
                for name, found in titles.items()
            },
            "phase_medians_s": {
                name: {
                    phase: round(statistics.median(p.get(phase, 0.0) for p in found), 3)
                    for phase in (*PHASES, "total", "outside_try")
                }
                for name, found in phases.items()
            },
        }
        print(f"no-op Python task:            {medians['noop']:.2f} s (median of {args.runs})")
        print(
            f"trivial stage, Spark Connect: {medians['connect']:.2f} s -> fixed cost "
            f"{result['fixed_cost_s']['connect']:.2f} s"
        )
        print(
            f"  the same right after another: {medians['connect_again']:.2f} s -> fixed cost "
            f"{result['fixed_cost_s']['connect_again']:.2f} s"
        )
        print(
            f"trivial stage, spark-submit:  {medians['submit']:.2f} s -> fixed cost "
            f"{result['fixed_cost_s']['submit']:.2f} s"
        )
        for name, medians_by_phase in result["phase_medians_s"].items():
            print(
                f"  {name} phases (medians, s): "
                + ", ".join(f"{k} {v:.3f}" for k, v in medians_by_phase.items())
            )
        for name, by_part in result["core_s_per_run"].items():
            print(
                f"  {name} CPU per run (core-s, medians): "
                + ", ".join(f"{k} {v:.2f}" for k, v in by_part.items())
            )
            top = result["core_s_per_run_by_process"][name]
            print("     by process (mean): " + "; ".join(f"{t} {v:.2f}" for t, v in list(top.items())[:6]))
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2))
        print(f"written to {args.output}")


if __name__ == "__main__":
    main()
