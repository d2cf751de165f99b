"""Recovery work: how much runs again after one failure, this provider against what users do today.

    python bench/bench_recovery_work.py            (about 20 minutes on 2 cores)

Pipeline (bench/recovery/: shape.py, ft_dags.py, dags.py): extract fanning out to 4 independent
branches of 3 stages, real local Spark, a live Airflow (LocalExecutor), two stages at a time. Two
faults:

* fail: the last stage of branch 4 (b4_s3) fails once, after doing its work;
* lose: one data object of b4_s2's output is lost before b4_s3 reads it.

Alternatives: this provider's region failover, with each stage a spark-submit and with each stage a
session on a Spark Connect server; Airflow's own retries (retries=1, no delay); "clear the
failed task and everything downstream" (done by this script the moment the run fails, as an operator
would); re-running the whole DAG (a new run); the whole pipeline as one Spark application retried as a
unit (fail only: it keeps no intermediate data to lose). For each: whether it reached a successful
run, wall time from the first trigger to success, the stage executions and stage-seconds that ran
again (every try of a stage after its first), and the ratio to the minimal restart set (Flink's
region failover: b4_s3; with b4_s2 lost: b4_s2 and b4_s3). Outputs of every successful alternative
are compared with a failure-free run. Figures are printed and written to bench/results/recovery_work.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration  # noqa: E402
from airflow_ft_provider.model.exchanges import Input, Output  # noqa: E402
from airflow_ft_provider.partitions import RunRef, S3PartitionStore  # noqa: E402
from airflow_ft_provider.partitions.parquet import read_table  # noqa: E402
from bench.cpu_sampler import CpuSampler, machine_busy_seconds  # noqa: E402
from bench.live_bench import live_bench  # noqa: E402
from ft_harness.airflow.live_airflow import LiveAirflow  # noqa: E402  (the type of Bench's airflow)

APPS = REPO / "bench" / "recovery"
DAG_FILES = ("dags.py", "ft_dags.py", "ft_pipeline.py", "shape.py")  # comparisons, pipelines, what they share
sys.path.insert(0, str(APPS))
from critical_path import critical_path, summed, table  # noqa: E402
from shape import BRANCHES, stages  # noqa: E402

FAILING, LOST = f"b{BRANCHES}_s3", f"b{BRANCHES}_s2"
FAULTS = {
    "fail": {"plain": {"fail_once": FAILING}, "ft": {"fail_once": FAILING}},
    "lose": {
        "plain": {"lose": f"{FAILING}:{LOST}"},
        "ft": {"ft_faults": [{"task": FAILING, "delete": [LOST]}]},
    },
}
SINKS = [f"b{b}_s3" for b in range(1, BRANCHES + 1)]


def minimal_restart_set(fault: str) -> set[str]:
    """What Flink's region failover restarts: computed by the failover core on the same graph."""
    description = PipelineDescription(
        "bench",
        [StageDeclaration(name, 1, (Input(up),) if up else (), (Output(name),)) for name, up in stages()],
    )
    return description.failover_strategy().tasks_to_restart(FAILING, [LOST] if fault == "lose" else [])


class Bench:
    def __init__(self, airflow: LiveAirflow, store: S3PartitionStore, data: Path) -> None:
        self.api = airflow.client
        self.store = store
        self.data = data
        self.stamp = datetime.now().strftime("%H%M%S")

    def trigger(self, dag_id: str, name: str, conf: dict) -> str:
        run_id = f"{name}__{self.stamp}"
        self.api.trigger_dag_run(dag_id, conf, run_id=run_id)
        return run_id

    def wait(self, dag_id: str, run_id: str) -> str:
        return self.api.wait_for_dag_run(dag_id, run_id, timeout=1800, poll=2)["state"]

    def tries(self, dag_id: str, run_ids: list[str]) -> dict[str, list[dict]]:
        """Every try of every task across runs, per task, in time order (tries that did run only)."""
        per_task: dict[str, list[dict]] = {}
        for run_id in run_ids:
            for ti in self.api.task_instances(dag_id, run_id):
                for t in self.api.task_instance_tries(dag_id, run_id, ti["task_id"]):
                    if t.get("start_date") and t.get("end_date"):
                        per_task.setdefault(t["task_id"], []).append(t)
        for tries in per_task.values():
            tries.sort(key=lambda t: t["start_date"])
        return per_task

    def measure(
        self, dag_id: str, run_ids: list[str], started: float, recovered: bool, stages_per_task=1
    ) -> dict:
        per_task = self.tries(dag_id, run_ids)
        seconds = {task: [duration(t) for t in tries] for task, tries in per_task.items()}
        again = {task: s[1:] for task, s in seconds.items() if len(s) > 1}
        return {
            "recovered": recovered,
            "wall_s": round(time.monotonic() - started, 1) if recovered else None,
            "re_executed_stages": sum(len(s) for s in again.values()) * stages_per_task,
            "re_executed_stage_s": round(sum(sum(s) for s in again.values()), 1),
            "re_executed": sorted(again),
            "total_stage_s": round(sum(sum(s) for s in seconds.values()), 1),
            "runs": run_ids,
        }

    def critical_path(self, dag_id: str, run_id: str):
        """The run's critical path (bench/recovery/critical_path.py); the single application is one
        task whose log has no try phases: all of it is its Spark."""
        run = self.api.get_dag_run(dag_id, run_id)
        tries = {ti["task_id"]: ti for ti in self.api.task_instances(dag_id, run_id)}
        upstream = dict(stages()) if dag_id != "bench_recovery_single_app" else {}
        return critical_path(
            run["start_date"],
            tries,
            upstream,
            lambda task, try_number: self.api.task_log(dag_id, run_id, task, try_number),
        )

    # -- the alternatives ---------------------------------------------------------------------------
    def single_run(self, dag_id: str, name: str, conf: dict, **kw) -> dict:
        started = time.monotonic()
        run_id = self.trigger(dag_id, name, conf)
        state = self.wait(dag_id, run_id)
        return self.measure(dag_id, [run_id], started, state == "success", **kw)

    def clear_downstream(self, name: str, conf: dict) -> dict:
        dag_id, started = "bench_recovery_plain", time.monotonic()
        run_id = self.trigger(dag_id, name, conf)
        state = self.wait(dag_id, run_id)
        if state == "failed":
            failed = [
                ti["task_id"] for ti in self.api.task_instances(dag_id, run_id) if ti["state"] == "failed"
            ]
            self.api.clear_task_instances(dag_id, run_id, failed, include_downstream=True)
            self.api.wait_for_dag_run(dag_id, run_id, states=["queued", "running"], timeout=60, poll=0.5)
            state = self.wait(dag_id, run_id)
        return self.measure(dag_id, [run_id], started, state == "success")

    def rerun_all(self, name: str, conf: dict) -> dict:
        dag_id, started = "bench_recovery_plain", time.monotonic()
        first = self.trigger(dag_id, name, conf)
        runs = [first]
        if self.wait(dag_id, first) == "failed":
            runs.append(self.trigger(dag_id, name + "_rerun", {}))
        return self.measure(dag_id, runs, started, self.wait(dag_id, runs[-1]) == "success")

    # -- outputs ------------------------------------------------------------------------------------
    def plain_outputs(self, dag_id: str, run_id: str) -> list:
        return [fingerprint(pq.read_table(self.data / dag_id / run_id / sink).to_pylist()) for sink in SINKS]

    def ft_outputs(self, run_id: str, dag_id: str = "bench_recovery_ft") -> list:
        run = RunRef(dag_id, run_id)
        return [fingerprint(read_table(self.store, run.parse(sink)).to_pylist()) for sink in SINKS]


def duration(t: dict) -> float:
    return (datetime.fromisoformat(t["end_date"]) - datetime.fromisoformat(t["start_date"])).total_seconds()


def fingerprint(rows: list[dict]) -> tuple:
    return len(rows), sum(r["key"] * 31 + r["value"] for r in rows), max(r["depth"] for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="default bench/results/recovery_work.json (recovery_failure_free.json with --failure-free-only)",
    )
    parser.add_argument(
        "--failure-free-only",
        action="store_true",
        help="only the failure-free runs of the Spark Connect variants and the single application",
    )
    parser.add_argument(
        "--airflow",
        action="append",
        default=[],
        metavar="SECTION__KEY=VALUE",
        help="an Airflow setting for every component (e.g. scheduler__scheduler_idle_sleep_time=0.2); "
        "without any, Airflow's defaults",
    )
    args = parser.parse_args()
    results_dir = REPO / "bench" / "results"
    args.output = args.output or results_dir / (
        "recovery_failure_free.json" if args.failure_free_only else "recovery_work.json"
    )
    data = Path(tempfile.mkdtemp(prefix="ft-bench-recovery-"))
    stack = ExitStack()
    env = {
        "FT_BENCH_RECOVERY_APPS": str(APPS),
        "FT_BENCH_RECOVERY_DATA": str(data),
        "AIRFLOW_CONN_SPARK_LOCAL2": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    }
    for setting in args.airflow:
        key, _, value = setting.partition("=")
        env[f"AIRFLOW__{key.upper()}"] = value
    try:
        live = stack.enter_context(
            live_bench(
                "ft-bench-recovery",
                [APPS / n for n in DAG_FILES],
                env=env,
                server_conf={"spark.driver.memory": "2g"},
            )
        )
        s3, airflow, bucket = live.s3, live.airflow, "ft-bench-recovery"
        dags = [
            "bench_recovery_ft",
            "bench_recovery_ft_connect",
            "bench_recovery_ft_connect_4",
            "bench_recovery_ft_connect_mixed",
            "bench_recovery_retries",
            "bench_recovery_plain",
            "bench_recovery_single_app",
        ]
        airflow.wait_for_dags(dags, timeout=180)
        bench = Bench(airflow, S3PartitionStore(s3.client(), f"s3://{bucket}/pipelines/"), data)
        if args.failure_free_only:
            failure_free(bench, args.output, args.airflow)
            return

        reference = {
            "ft": bench.single_run("bench_recovery_ft", "reference", {}),
            "ft_connect": bench.single_run("bench_recovery_ft_connect", "reference", {}),
            "plain": bench.single_run("bench_recovery_plain", "reference", {}),
            "single_app": bench.single_run(
                "bench_recovery_single_app", "reference", {}, stages_per_task=len(list(stages()))
            ),
        }
        expected = bench.plain_outputs("bench_recovery_plain", reference["plain"]["runs"][0])
        assert bench.ft_outputs(reference["ft"]["runs"][0]) == expected, (
            "the two pipelines compute different data"
        )
        assert (
            bench.ft_outputs(reference["ft_connect"]["runs"][0], "bench_recovery_ft_connect") == expected
        ), "Spark Connect computes different data"
        single = reference["single_app"]["wall_s"]
        reference["ratios_to_single_app"] = {
            k: round(reference[k]["wall_s"] / single, 2) for k in ("ft", "ft_connect")
        }
        print(
            f"failure-free run: provider on spark-submit {reference['ft']['wall_s']} s "
            f"({reference['ft']['total_stage_s']} stage-s), "
            f"on Spark Connect {reference['ft_connect']['wall_s']} s "
            f"({reference['ft_connect']['total_stage_s']} stage-s), plain {reference['plain']['wall_s']} s "
            f"({reference['plain']['total_stage_s']} stage-s), "
            f"one Spark application {single} s; wall time / one "
            f"application: {reference['ratios_to_single_app']}"
        )

        results: dict = {"reference": reference}
        for fault in ("fail", "lose"):
            plain, ft = FAULTS[fault]["plain"], FAULTS[fault]["ft"]
            rows = {
                "region failover (this provider)": bench.single_run("bench_recovery_ft", f"ft_{fault}", ft),
                "region failover, Spark Connect": bench.single_run(
                    "bench_recovery_ft_connect", f"ftc_{fault}", ft
                ),
                "Airflow retries (retries=1)": bench.single_run(
                    "bench_recovery_retries", f"retries_{fault}", plain
                ),
                "clear failed task + downstream": bench.clear_downstream(f"clear_{fault}", plain),
                "re-run the whole DAG": bench.rerun_all(f"rerun_{fault}", plain),
            }
            if fault == "fail":
                rows["one Spark application, retried"] = bench.single_run(
                    "bench_recovery_single_app", "single_fail", plain, stages_per_task=len(list(stages()))
                )
            minimal = minimal_restart_set(fault)
            print(
                f"\n{fault}: "
                + (
                    "b4_s3 fails once after its work"
                    if fault == "fail"
                    else "b4_s2 lost before b4_s3 reads it"
                )
                + f" -- minimal restart set {sorted(minimal)}"
            )
            print(
                f"  {'alternative':34} {'recovered':>9} {'wall s':>7} "
                f"{'stages again':>12} {'stage-s again':>13} {'ratio':>6}"
            )
            for label, row in rows.items():
                row["ratio_to_minimal"] = round(row["re_executed_stages"] / len(minimal), 2)
                if row["recovered"]:
                    dag_id, last = label_dag(label), row["runs"][-1]
                    if dag_id.startswith("bench_recovery_ft"):
                        row["output_matches"] = bench.ft_outputs(last, dag_id) == expected
                    elif dag_id != "bench_recovery_single_app":
                        row["output_matches"] = bench.plain_outputs(dag_id, last) == expected
                print(
                    f"  {label:34} {'yes' if row['recovered'] else 'NO':>9} {row['wall_s'] or '-':>7} "
                    f"{row['re_executed_stages']:>12} "
                    f"{row['re_executed_stage_s']:>13} {row['ratio_to_minimal']:>6}"
                )
            results[fault] = {"minimal_restart_set": sorted(minimal), "alternatives": rows}
        mismatches = [
            (f, label)
            for f in ("fail", "lose")
            for label, r in results[f]["alternatives"].items()
            if r.get("output_matches") is False
        ]
        print(f"\noutput mismatches against the failure-free run: {mismatches or 0}")
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=2))
        print(f"written to {args.output}")
    finally:
        stack.close()
        shutil.rmtree(data, ignore_errors=True)


def failure_free(bench: Bench, output: Path, settings: list[str]) -> None:
    """Failure-free wall time of the Spark Connect variants against the single application, measured
    in turn, three rounds; medians."""
    dags = {
        "ft_connect (2 at a time)": "bench_recovery_ft_connect",
        "ft_connect (4 at a time)": "bench_recovery_ft_connect_4",
        # the 2-at-a-time pipeline defined in the comparisons' DAG file (SparkSubmitOperator's imports)
        "ft_connect (2 at a time), in the comparisons' DAG file": "bench_recovery_ft_connect_mixed",
        "one Spark application": "bench_recovery_single_app",
    }
    walls: dict[str, list[float]] = {label: [] for label in dags}
    cpu: dict[str, list[float]] = {label: [] for label in dags}  # the machine's busy core-seconds
    parts: dict[str, list[dict[str, float]]] = {label: [] for label in dags}  # ... by part (cpu_sampler)
    for round_ in range(3):
        for label, dag_id in dags.items():
            kw = {"stages_per_task": len(list(stages()))} if dag_id == "bench_recovery_single_app" else {}
            busy_before = machine_busy_seconds()
            with CpuSampler() as sampled:
                row = bench.single_run(dag_id, f"ff{round_}", {}, **kw)
            cpu[label].append(round(machine_busy_seconds() - busy_before, 1))
            parts[label].append({part: round(seconds, 1) for part, seconds in sampled.seconds.items()})
            assert row["recovered"], f"{dag_id} failed"
            if dag_id != "bench_recovery_single_app":
                expected = bench.ft_outputs(bench_reference(bench), "bench_recovery_ft_connect")
                assert bench.ft_outputs(row["runs"][0], dag_id) == expected, (
                    f"{dag_id} computes different data"
                )
            walls[label].append(row["wall_s"])
    medians = {label: sorted(w)[1] for label, w in walls.items()}
    cores = os.cpu_count() or 1
    median_cpu = {label: sorted(c)[1] for label, c in cpu.items()}
    median_parts = {  # of the round whose wall time is the median
        label: parts[label][walls[label].index(median)] for label, median in medians.items()
    }
    single = medians["one Spark application"]
    paths = {  # the median round's critical path of each way
        label: bench.critical_path(dag_id, f"ff{walls[label].index(medians[label])}__{bench.stamp}")
        for label, dag_id in dags.items()
    }
    result = {
        "airflow_settings": settings or "Airflow's defaults",
        "walls_s": walls,
        "median_s": medians,
        "ratio_to_single_app": {k: round(v / single, 2) for k, v in medians.items()},
        "cores": cores,
        "busy_core_s": cpu,
        "median_busy_core_s": median_cpu,
        "lower_bound_s": {k: round(v / cores, 1) for k, v in median_cpu.items()},
        "core_s_by_part": parts,
        "median_round_core_s_by_part": median_parts,
        "critical_path_s": {label: summed(path) for label, path in paths.items()},
        "critical_path_stages": {label: [s.task for s in path] for label, path in paths.items()},
    }
    for label, median in medians.items():
        print(
            f"  {label:28} median {median:6.1f} s  ({', '.join(f'{w:.1f}' for w in walls[label])})  "
            f"x{median / single:.2f} the single application"
        )
    for label, busy in median_cpu.items():
        print(
            f"  {label:28} the machine busy {busy:6.1f} core-s (median; {cores} cores): "
            f"{busy / cores:5.1f} s of wall time at the least, "
            f"{busy / (medians[label] * cores):.0%} of its cores used"
        )
        print(f"  {'':28} by part: " + ", ".join(f"{p} {v:.1f}" for p, v in median_parts[label].items()))
    for label, path in paths.items():
        print(table(label, path))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2))
    print(f"written to {output}")


_REFERENCE: list[str] = []


def bench_reference(bench: Bench) -> str:
    """One failure-free run of the 2-at-a-time Connect pipeline whose outputs the others must equal."""
    if not _REFERENCE:
        _REFERENCE.append(bench.single_run("bench_recovery_ft_connect", "ff_reference", {})["runs"][0])
    return _REFERENCE[0]


def label_dag(label: str) -> str:
    return {
        "region failover (this provider)": "bench_recovery_ft",
        "region failover, Spark Connect": "bench_recovery_ft_connect",
        "Airflow retries (retries=1)": "bench_recovery_retries",
        "one Spark application, retried": "bench_recovery_single_app",
    }.get(label, "bench_recovery_plain")


if __name__ == "__main__":
    main()
