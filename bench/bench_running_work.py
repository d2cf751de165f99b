"""Spark Connect work that outlives its worker (issue 31), live on the reference deployment.

    python bench/bench_running_work.py [--at 0.8]

Starts the reference deployment (ft_harness/airflow/deployment.py: CeleryExecutor with two workers,
PostgreSQL, Redis, a Spark standalone cluster with a Spark Connect server, S3 over HTTP) with
bench/running/ft_bench_running_write.py: one stage W whose write takes 60 s in the Spark server. Three
runs, side by side:

1. failure-free;
2. W's Celery worker lost (SIGKILL of the worker and everything it started) at 80 % of the write, with
   ``[ft_provider] wait_for_running_work`` on (the default): the next try, on the other worker, waits
   for the write and commits it;
3. the same loss with it off: the next try interrupts the write and computes it again.

Prints each run's wall time from trigger to success and each lost run's extra time over the failure-free
one; the figure is their ratio (target: <= 0.3). Both lost runs include the same detection time (the
deployment's 20 s heartbeat timeout) and 1 s restart delay. Checked: the output's rows, which tries
computed the write (the Spark tasks' ledger), and what try 2's log says. Writes
bench/results/running_work.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.partitions import RunRef, S3PartitionStore  # noqa: E402
from airflow_ft_provider.partitions.parquet import read_table  # noqa: E402

sys.path.insert(0, str(REPO / "bench" / "running"))
from ft_bench_running_write import LEDGERS, WRITE_SECONDS  # noqa: E402

from ft_harness.airflow.deployment import ReferenceDeployment  # noqa: E402

RESULTS = REPO / "bench" / "results" / "running_work.json"
DAG_ID = "ft_bench_running_write"
OFF = {"AIRFLOW__FT_PROVIDER__WAIT_FOR_RUNNING_WORK": "False"}


class Bench:
    def __init__(self, deployment: ReferenceDeployment) -> None:
        assert deployment.airflow is not None and deployment.s3 is not None
        self.airflow = deployment.airflow
        self.client = deployment.airflow.client
        self.store = S3PartitionStore(deployment.s3.client(), deployment.store_url)
        self.stamp = datetime.now().strftime("%H%M%S")

    def restart_workers(self, env: dict[str, str]) -> None:
        for worker in self.airflow.workers:
            self.airflow.kill_worker(worker)
            self.airflow.start_worker(worker, env=env)

    def run(self, name: str, lose_at: float | None, env: dict[str, str]) -> dict[str, Any]:
        run_id = f"{DAG_ID}__{self.stamp}_{name}"
        t0 = time.monotonic()
        self.client.trigger_dag_run(DAG_ID, {"ft_faults": []}, run_id=run_id)
        lost_after = None
        if lose_at is not None:
            running = self.client.wait_for_task_instance(
                DAG_ID, run_id, "W", predicate=lambda ti: ti["state"] == "running" and ti.get("hostname")
            )
            while "writing ['w']" not in self.airflow.task_log(DAG_ID, run_id, "W", 1):
                time.sleep(0.5)
            time.sleep(lose_at * WRITE_SECONDS)  # the write started as the try logged its plan
            worker = self.airflow.worker(running["hostname"])
            self.airflow.kill_worker(worker)
            lost_after = time.monotonic() - t0
        state = self.client.wait_for_dag_run(DAG_ID, run_id, timeout=600, poll=0.5)["state"]
        wall = time.monotonic() - t0
        if lose_at is not None:
            self.airflow.start_worker(worker, env=env)
        if state != "success":
            raise SystemExit(f"{run_id} ended {state}:\n{self.airflow.describe_run(DAG_ID, run_id)}")
        table = read_table(self.store, RunRef(DAG_ID, run_id).parse("w")).to_pylist()
        rows = sorted((r["key"], r["value"]) for r in table)
        assert rows == [(key, key * 10) for key in range(40)], rows
        ledger = Path(LEDGERS) / run_id
        lines = ledger.read_text().split() if ledger.exists() else []
        computed = sorted(line.split(":")[0] for line in lines)
        ledger.unlink(missing_ok=True)
        tries = self.client.task_instance_tries(DAG_ID, run_id, "W")
        said = ""
        if len(tries) > 1:
            log = self.airflow.task_log(DAG_ID, run_id, "W", len(tries))
            found = re.search(r"try \d[^\"]*output committed[^\"]*", log)
            said = found[0] if found else "(computed again)"
        result = {
            "wall_s": round(wall, 2),
            "worker_lost_after_s": None if lost_after is None else round(lost_after, 2),
            "tries": len(tries),
            "spark_tasks_computed_by_try": computed,
            "said": said,
        }
        print(f"{name}: {json.dumps(result)}", flush=True)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", type=float, default=0.8, help="lose the worker at this fraction of the write")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the deployment on a kill too
    os.makedirs(LEDGERS, exist_ok=True)
    with ReferenceDeployment([REPO / "bench" / "running"]) as deployment:
        print(f"deployment up in {deployment.started_in:.0f} s", flush=True)
        bench = Bench(deployment)
        bench.airflow.wait_for_dags([DAG_ID], timeout=300)
        free = bench.run("failure_free", None, {})
        waited = bench.run("lost_waited_for", args.at, {})
        bench.restart_workers(OFF)
        again = bench.run("lost_computed_again", args.at, OFF)
    extra_waited = waited["wall_s"] - free["wall_s"]
    extra_again = again["wall_s"] - free["wall_s"]
    results = {
        "write_seconds": WRITE_SECONDS,
        "worker_lost_at": args.at,
        "runs": {"failure_free": free, "lost_waited_for": waited, "lost_computed_again": again},
        "extra_s": {"waited_for": round(extra_waited, 2), "computed_again": round(extra_again, 2)},
        "ratio": round(extra_waited / extra_again, 3),
    }
    print(
        f"\nwall to success: failure-free {free['wall_s']:.1f} s; worker lost at {args.at:.0%} of the "
        f"{WRITE_SECONDS} s write: waited for {waited['wall_s']:.1f} s (+{extra_waited:.1f} s), computed "
        f"again {again['wall_s']:.1f} s (+{extra_again:.1f} s); ratio of the extra times "
        f"{results['ratio']:.2f} (target <= 0.3)"
    )
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
