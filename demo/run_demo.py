"""The one-command demo: watch a failover region recover in a real Airflow, then read what happened.

    scripts/demo.sh              # interactive: report, then the Airflow UI stays up until Ctrl-C
    scripts/demo.sh --no-wait    # CI: report, stop everything, exit 0 only if recovery worked

What it does:
1. starts an S3 endpoint (moto in server mode; or uses FT_DEMO_S3_ENDPOINT / _ACCESS_KEY /
   _SECRET_KEY / _REGION) and creates a fresh bucket for the partitions;
2. starts a Spark Connect server (``local[2]``, from the pyspark package's jars) and a local Airflow
   (API server + UI, scheduler, DAG processor, triggerer; SQLite, LocalExecutor) in a fresh temporary
   AIRFLOW_HOME on free ports, with the pipelines of ``dags_examples/``; ``spark_default`` is the
   Connect server, so every stage is a session on it (``--spark-submit``: one local spark-submit per
   stage instead);
3. triggers ``ft_example_orders_etl`` twice at once: with faults (``clean_orders`` fails once, and a data
   file of ``enriched_orders`` is deleted when ``customer_aggregates`` starts, so whichever of its two
   consumers reads it first meets ``PartitionNotFound``) and without;
4. prints progress, then a recovery report built from the recovery journal in S3, the task tries of
   the Airflow REST API and the partition manifests, and compares the outputs of the two runs.
Everything it starts is stopped on exit (Ctrl-C / SIGTERM included); nothing is left to clean up.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from airflow_ft_provider.partitions import RunRef, S3PartitionStore  # noqa: E402
from airflow_ft_provider.partitions.parquet import read_table  # noqa: E402
from airflow_ft_provider.recovery.journal import RecoveryJournal  # noqa: E402
from airflow_ft_provider.run_results import found_lost  # noqa: E402

DAG_ID = "ft_example_orders_etl"
FAULTS = [
    {"task": "clean_orders", "times": 1},  # an injected failure
    {"task": "customer_aggregates", "delete": ["enriched_orders"]},  # a lost partition
]
FINAL_OUTPUTS = ["daily_revenue", "customer_aggregates"]
PARTITIONS_XCOM_KEY = "ft_partitions"
TERMINAL = {"success", "failed"}


def say(text: str = "") -> None:
    print(text, flush=True)


def clock(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S")


def iso_ts(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def ti_name(ti: dict[str, Any]) -> str:
    mi = ti.get("map_index", -1)
    return ti["task_id"] if mi is None or mi < 0 else f"{ti['task_id']}[{mi}]"


# -- infrastructure ----------------------------------------------------------------------------------


class Infrastructure:
    """The S3 endpoint and the Airflow instance of one demo run; ``stop()`` is idempotent."""

    def __init__(
        self,
        airflow_home: str | None,
        *,
        spark_submit: bool = False,
        dags_folder: Path | None = None,
        env_name: str = "demo.env",
    ) -> None:
        self.airflow_home = airflow_home
        self.spark_submit = spark_submit
        self.dags_folder = dags_folder  # dev mode: the user's folder, in place; else a copy of dags_examples/
        self.env_name = env_name
        self.s3: Any = None
        self.own_s3 = False
        self.spark_connect: Any = None
        self.airflow: Any = None
        self.store_url = ""

    def start_s3(self) -> None:
        from ft_harness.services.s3_server import S3Endpoint, start_moto_server

        if os.environ.get("FT_DEMO_S3_ENDPOINT"):
            self.s3 = S3Endpoint(
                os.environ["FT_DEMO_S3_ENDPOINT"],
                os.environ["FT_DEMO_S3_ACCESS_KEY"],
                os.environ["FT_DEMO_S3_SECRET_KEY"],
                os.environ.get("FT_DEMO_S3_REGION", "us-east-1"),
            )
            say(f"   using the S3 endpoint {self.s3.url} (FT_DEMO_S3_ENDPOINT)")
        else:
            self.s3 = start_moto_server()
            self.own_s3 = True
            say(f"   S3 endpoint (moto server) at {self.s3.url}")
        bucket = f"ft-demo-{secrets.token_hex(4)}"
        self.s3.client().create_bucket(Bucket=bucket)
        self.store_url = f"s3://{bucket}/pipelines/"
        say(f"   partition store: {self.store_url}")

    def start_spark(self) -> None:
        if self.spark_submit:
            say("   Spark: one local spark-submit per stage (--spark-submit)")
            return
        from ft_harness.services.spark_connect import SparkConnectServer

        self.spark_connect = SparkConnectServer()
        with Ticker("   starting a Spark Connect server (local[2])"):
            self.spark_connect.start()
        say(f"   Spark Connect server at {self.spark_connect.url} (log {self.spark_connect.log})")

    def start_airflow(self) -> None:
        from ft_harness.airflow.live_airflow import LiveAirflow
        from ft_harness.services.spark_env import spark_environment

        spark = spark_environment()
        submit = {"conn_type": "spark", "host": "local[1]"}
        env = {
            "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(
                {
                    "conn_type": "aws",
                    "login": self.s3.access_key,
                    "password": self.s3.secret_key,
                    "extra": {"endpoint_url": self.s3.url, "region_name": self.s3.region},
                }
            ),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
                submit if self.spark_connect is None else self.spark_connect.connection()
            ),
            "AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL": self.store_url,
            "FT_EXAMPLES_JOBS": str(REPO / "dags_examples" / "jobs"),
            **{
                k: spark[k]
                for k in ("PATH", "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP")
            },
        }
        home = self.airflow_home
        if self.dags_folder is None:
            self.airflow = LiveAirflow(
                [REPO / "dags_examples"], env=env, home=home, keep_home=bool(home), startup_timeout=600
            )
        else:  # your DAG files may not parse yet; an edited file is parsed again within seconds
            env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"] = "5"
            self.airflow = LiveAirflow(
                [],
                env=env,
                home=home,
                keep_home=bool(home),
                startup_timeout=600,
                dags_folder=self.dags_folder,
                fail_on_import_errors=False,
            )
        with Ticker("   starting Airflow (db migrate, API server, scheduler, DAG processor, triggerer)"):
            self.airflow.start()
        say(f"   Airflow is up at {self.airflow.base_url} (home {self.airflow.home})")
        # For a second terminal: `source <home>/demo.env` puts this environment's airflow and airflow-ft
        # on PATH and points them at this Airflow.
        wanted = {
            k: v
            for k, v in self.airflow.environment().items()
            if k.startswith(("AIRFLOW", "FT_", "SPARK_", "PYSPARK_")) or k == "PYTHONPATH"
        }
        self.env_file = self.airflow.home / self.env_name
        self.env_file.write_text(
            f'export PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"\n'
            + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(wanted.items()))
        )

    def store(self) -> S3PartitionStore:
        return S3PartitionStore(self.s3.client(), self.store_url)

    def stop(self) -> None:
        if self.airflow is not None:
            say("   stopping Airflow ...")
            self.airflow.stop()
            self.airflow = None
        if self.spark_connect is not None:
            say("   stopping the Spark Connect server ...")
            self.spark_connect.stop()
            self.spark_connect = None
        if self.s3 is not None and self.own_s3:
            from ft_harness.services.s3_server import stop_moto_server

            say("   stopping the S3 endpoint ...")
            stop_moto_server(self.s3)
        self.s3 = None


class Ticker:
    """Prints the elapsed time every few seconds while a blocking step runs."""

    def __init__(self, text: str, every: float = 15.0) -> None:
        self.text, self.every = text, every
        self._done = threading.Event()

    def __enter__(self) -> Ticker:
        say(f"{self.text} ...")
        self.t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._done.wait(self.every):
            say(f"     ... {time.monotonic() - self.t0:.0f} s")

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


# -- running -----------------------------------------------------------------------------------------


def wait_with_progress(api: Any, runs: dict[str, str], timeout: float) -> dict[str, dict[str, Any]]:
    """Poll the runs, printing each task-instance state change, until all are finished."""
    t0 = time.monotonic()
    seen: dict[tuple[str, str], tuple[Any, Any]] = {}
    finals: dict[str, dict[str, Any]] = {}
    width = max(len(label) for label in runs)
    while True:
        for label, run_id in runs.items():
            if label in finals:
                continue
            try:
                tis = api.task_instances(DAG_ID, run_id)
                run = api.get_dag_run(DAG_ID, run_id)
            except Exception as err:  # noqa: BLE001  (a busy SQLite: try again at the next poll)
                say(f"   (API busy: {err.__class__.__name__}; retrying)")
                continue
            for ti in sorted(tis, key=lambda t: (t.get("start_date") or "~", ti_name(t))):
                key = (label, ti_name(ti))
                now = (ti["state"], ti["try_number"])
                if seen.get(key) != now and ti["state"] is not None:
                    seen[key] = now
                    elapsed = time.monotonic() - t0
                    say(
                        f"   [{int(elapsed) // 60}:{int(elapsed) % 60:02d}] {label:{width}}  "
                        f"{ti_name(ti):22} {ti['state']:14} try {ti['try_number']}"
                    )
            if run["state"] in TERMINAL:
                finals[label] = run
                say(f"   run {label} finished: {run['state']}")
        if len(finals) == len(runs):
            return finals
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"the runs did not finish within {timeout:.0f} s")
        time.sleep(2)


# -- the report --------------------------------------------------------------------------------------


def lost_partitions(
    event: dict[str, Any],
    producers: dict[str, str],
    histories: dict[str, list[dict]],
    pipelined: set[str] = frozenset(),
) -> list[str]:
    """The unavailable blocking partitions of a decision that had really been produced before it.

    The journal's ``unavailable`` also lists partitions that simply did not exist yet (their producer had
    not run) and pipelined ones (they live for one execution of their region: a superseded one is gone
    by design, not lost); a blocking partition counts as lost only if its producer had a successful
    try that ended before the failure.
    """
    named = re.findall(r"partition '([^']+)'", str(event.get("cause") or ""))  # PartitionNotFound names it
    lost = [p for p in named if p in producers and p not in pipelined]
    for partition_id in event.get("unavailable") or []:
        if partition_id in lost or partition_id in pipelined:
            continue
        task = producers.get(partition_id)
        tries = histories.get(task or "", [])
        if any(
            t.get("state") == "success" and (iso_ts(t.get("end_date")) or 1e18) < event["time"] for t in tries
        ):
            lost.append(partition_id)
    return lost


def region_reasons(
    event: dict[str, Any], lost: list[str], producers: dict[str, str]
) -> list[tuple[list[str], str]]:
    """Why each region of a failover decision restarts, and whether it had to be stopped (cleared)."""
    cleared = set(event.get("cleared") or [])
    out = []
    for region in event.get("regions") or []:
        if event.get("task") in region:
            why = "contains the failed task"
        elif mine := [p for p in lost if producers.get(p) in region]:
            why = f"produced the lost partition {', '.join(mine)} (backtracking)"
        else:
            why = "consumes the output of a restarted region (downstream)"
        if event.get("task") not in region:
            why += "; cleared" if cleared & set(region) else "; had not started, nothing to stop"
        out.append((region, why))
    return out


def short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_partitions(api: Any, run_id: str) -> list[dict[str, Any]]:
    """Every partition the run's task instances committed in their last try (from their XCom)."""
    found = []
    for ti in api.task_instances(DAG_ID, run_id):
        try:
            entries = api.xcom_entries(DAG_ID, run_id, ti["task_id"], ti.get("map_index", -1))
        except Exception:  # noqa: BLE001
            continue
        for partition_id, info in (entries.get(PARTITIONS_XCOM_KEY) or {}).items():
            found.append({"partition": partition_id, "task": ti_name(ti), "try": ti["try_number"], **info})
    return sorted(found, key=lambda p: p["partition"])


def rows_of(store: S3PartitionStore, run_id: str, partition_id: str) -> list[tuple]:
    table = read_table(store, RunRef(DAG_ID, run_id).parse(partition_id)).to_pylist()
    return sorted(tuple(sorted(row.items())) for row in table)


def build_report(
    infra: Infrastructure, runs: dict[str, str], finals: dict[str, dict[str, Any]]
) -> tuple[str, bool]:
    api = infra.airflow.client
    store = infra.store()
    faulty, reference = runs["with faults"], runs["failure-free"]
    run = RunRef(DAG_ID, faulty)
    history = RecoveryJournal(store, run).events()
    events = [e.to_json() for e in history]
    failovers = [e for e in events if e.get("kind") == "failover"]
    first_failure = min((e["time"] for e in failovers), default=None)
    partitions = run_partitions(api, faulty)
    producers = {p["partition"]: p["task"] for p in partitions}
    pipelined = {p["partition"] for p in partitions if p.get("type") == "pipelined"}
    histories = {}
    for ti in api.task_instances(DAG_ID, faulty):
        histories[ti_name(ti)] = api.task_instance_tries(
            DAG_ID, faulty, ti["task_id"], ti.get("map_index", -1)
        )
    lines: list[str] = []
    add = lines.append

    add("=" * 100)
    add(f"RECOVERY REPORT  DAG {DAG_ID}")
    add(f"  run with faults: {faulty}  -> {finals['with faults']['state']}")
    add(f"  failure-free:    {reference}  -> {finals['failure-free']['state']}")
    add(f"  injected faults: {json.dumps(FAULTS)}")
    met = [e["task"] for e in failovers if "enriched_orders" in (e.get("unavailable") or ())]
    add("    - clean_orders fails on its first try")
    add(
        "    - a data file of enriched_orders is deleted when customer_aggregates starts; the first of its "
        f"two consumers to read it meets PartitionNotFound (this run: {', '.join(met) or 'none'})"
    )
    add("")
    add(
        f"Failures and failover decisions ({len(failovers)}; recovery journal under "
        f"{store.layout.run_prefix(run)}_failover/events/):"
    )
    for number, event in enumerate(failovers, 1):
        add(
            f"  #{number} {clock(event['time'])}  {event['task']} try {event.get('try_number')} failed: "
            f"{short(str(event.get('cause')))}"
        )
        lost = lost_partitions(event, producers, histories, pipelined)
        if lost:
            add(f"       lost partitions (had been written, now unreadable): {', '.join(lost)}")
        if event.get("restart"):
            delay = float(event.get("delay") or 0)
            at = event.get("restart_at")
            add(
                f"       restart strategy {event.get('strategy')}: restart after {delay:.1f} s"
                + (f" (not before {clock(at)})" if at else "")
            )
            for region, why in region_reasons(event, lost, producers):
                add(f"       restart region [{', '.join(region)}]: {why}")
            add(
                f"       cleared through the REST API (had started): "
                f"{', '.join(event.get('cleared') or []) or 'none'}"
            )
        else:
            add(f"       no restart: {event.get('reason')}")
    for event in (e for e in events if e.get("kind") == "manual"):
        add(
            f"  manual restart {clock(event['time'])} of {event['task']}"
            f": {', '.join(event.get('cleared') or [])}"
        )
    if not failovers:
        add("  (none recorded)")
    add("")

    tries = {ti_name(ti): ti["try_number"] for ti in api.task_instances(DAG_ID, faulty)}
    ref_tries = {ti_name(ti): ti["try_number"] for ti in api.task_instances(DAG_ID, reference)}
    total, ref_total = sum(tries.values()), sum(ref_tries.values())
    restart_all = len(tries) * (1 + sum(1 for e in failovers if e.get("restart")))
    add("Task runs (Airflow tries):")
    add(f"  {'task':24} {'with faults':>11} {'failure-free':>13}")
    for name in sorted(tries, key=lambda n: list(ref_tries).index(n) if n in ref_tries else 99):
        add(f"  {name:24} {tries[name]:>11} {ref_tries.get(name, 0):>13}")
    add(f"  {'total':24} {total:>11} {ref_total:>13}")
    add(
        f"  -> {total - ref_total} extra task run(s) for {len(failovers)} failure(s); restarting the whole "
        f"pipeline at each failure would have run {restart_all}"
    )
    add("")

    add("Partitions of the run with faults (manifests in S3; reused = kept from before the failures):")
    reused_raw = False
    lost_then_rebuilt = found_lost(history)
    for part in partitions:
        pid = part["partition"]
        if part.get("type") == "pipelined":
            execution = part.get("execution") or "?"
            verdict = "recomputed" if execution != "t1" else "written once"
            where = f"kept by Spark Connect as view {part['view']}" if part.get("view") else "S3 scratch"
            add(
                f"  {pid:22} pipelined {part.get('rows', '?'):>6} rows  "
                f"{verdict:12} execution {execution} of "
                f"{part['task']}, {where} (pipelined partitions live for one execution of their region)"
            )
            continue
        manifest = store.manifest(run.parse(pid))
        producer = manifest.producer
        when = manifest.created_at
        if producer.try_number > 1 and pid in lost_then_rebuilt:  # lost once committed, committed again
            verdict, detail = "rebuilt", f"by {producer.task_id} try {producer.try_number} at {clock(when)}"
        elif producer.try_number > 1:  # its earlier tries failed or were cleared before they committed
            verdict, detail = (
                "written once",
                f"by {producer.task_id} try {producer.try_number} at {clock(when)} (no try committed before)",
            )
        elif first_failure is not None and when < first_failure:
            verdict, detail = (
                "reused",
                f"written by {producer.task_id} try 1 at {clock(when)}, before the first failure",
            )
            reused_raw = reused_raw or pid == "raw_orders"
        else:
            verdict, detail = (
                "written once",
                f"by {producer.task_id} try 1 at {clock(when)} (after the failures)",
            )
        add(f"  {pid:22} blocking  {manifest.row_count:>6} rows  {verdict:12} {detail}")
    add("")

    add(f"Final outputs compared with the failure-free run ({reference}):")
    matched = True
    for name in FINAL_OUTPUTS:
        try:
            mine, theirs = rows_of(store, faulty, name), rows_of(store, reference, name)
            same = mine == theirs and len(mine) > 0
            add(f"  {name:22} {'identical' if same else 'DIFFERENT'} ({len(mine)} vs {len(theirs)} rows)")
        except Exception as err:  # noqa: BLE001
            same = False
            add(f"  {name:22} could not be read: {err}")
        matched = matched and same
    add("")
    restarted = any(e.get("restart") for e in failovers)
    ok = (
        finals["with faults"]["state"] == "success"
        and finals["failure-free"]["state"] == "success"
        and restarted
        and matched
        and reused_raw
    )
    if ok:
        add(
            "RESULT: OK - the run recovered from every failure by "
            "restarting only the affected regions, re-used "
            "raw_orders, and produced exactly the output of the failure-free run."
        )
    else:
        add(
            "RESULT: FAILED - "
            + ", ".join(
                text
                for cond, text in (
                    (finals["with faults"]["state"] != "success", "the run with faults did not succeed"),
                    (finals["failure-free"]["state"] != "success", "the failure-free run did not succeed"),
                    (not restarted, "no region restart was recorded"),
                    (not matched, "the outputs differ"),
                    (not reused_raw, "raw_orders was not re-used"),
                )
                if cond
            )
        )
    add("=" * 100)
    return "\n".join(lines), ok


# -- main --------------------------------------------------------------------------------------------


def usable_airflow_home(path: str | None) -> str | None:
    """``--airflow-home``: a new or empty directory, kept afterwards. Never one with files in it: the
    demo would mix its database and DAGs into them (pointed at ~/airflow, into a real Airflow home)."""
    if path is None:
        return None
    home = Path(path).expanduser().resolve()
    if home.exists() and (not home.is_dir() or any(home.iterdir())):
        raise SystemExit(
            f"--airflow-home {path}: {'is not a directory' if not home.is_dir() else 'is not empty'}; "
            "the demo needs a new or empty directory (it creates its database, logs and DAG folder there "
            "and keeps them afterwards): give another path, or leave the option out for a temporary one"
        )
    home.mkdir(parents=True, exist_ok=True)
    return str(home)


def preflight() -> None:
    java = shutil.which("java") or (
        os.environ.get("JAVA_HOME") and Path(os.environ["JAVA_HOME"], "bin", "java")
    )
    if not java:
        raise SystemExit(
            "Spark needs Java 17: install a JDK (e.g. apt-get install openjdk-17-jre-headless) "
            "or set JAVA_HOME, then run the demo again"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="exit after the report (default when CI is set or stdin is not a terminal)",
    )
    parser.add_argument(
        "--airflow-home",
        help="a new or empty directory to use (and keep) as AIRFLOW_HOME "
        "instead of a temporary one; a directory with files in it is refused, never changed",
    )
    parser.add_argument(
        "--timeout", type=float, default=1500, help="seconds to wait for the runs (default 1500)"
    )
    parser.add_argument(
        "--spark-submit",
        action="store_true",
        help="run each stage as its own spark-submit instead of on a Spark Connect server",
    )
    args = parser.parse_args(argv)
    interactive = not (args.no_wait or os.environ.get("CI") or not sys.stdin.isatty())

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    home = usable_airflow_home(args.airflow_home)
    preflight()
    infra = Infrastructure(home, spark_submit=args.spark_submit)
    ok = False
    try:
        say("1. Starting the services")
        infra.start_s3()
        infra.start_spark()
        infra.start_airflow()
        api = infra.airflow.client
        infra.airflow.wait_for_dags([DAG_ID], timeout=120)

        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        runs = {"with faults": f"demo_faults__{stamp}", "failure-free": f"demo_reference__{stamp}"}
        say(f"2. Triggering {DAG_ID} twice: with faults {json.dumps(FAULTS)} and without")
        api.trigger_dag_run(DAG_ID, {"ft_faults": FAULTS}, run_id=runs["with faults"])
        api.trigger_dag_run(DAG_ID, {"ft_faults": []}, run_id=runs["failure-free"])
        say(
            f"   watch it live: {infra.airflow.base_url}/dags/{DAG_ID}  (login {infra.airflow.username} / "
            f"{infra.airflow.password})"
        )
        say(
            "3. Waiting for both runs"
            + (
                " (each stage is a Spark application: about 20-40 s each on a small machine)"
                if args.spark_submit
                else " (each stage is a session on the Spark Connect server)"
            )
        )
        finals = wait_with_progress(api, runs, args.timeout)

        say("4. Building the recovery report")
        report, ok = build_report(infra, runs, finals)
        say()
        say(report)
        say()
        if interactive:
            say(
                f"The Airflow UI stays up: {infra.airflow.base_url}  login: {infra.airflow.username} / "
                f"{infra.airflow.password}"
            )
            say(f"  runs: {infra.airflow.base_url}/dags/{DAG_ID}/runs")
            say(f"  in another terminal: source {infra.env_file}")
            say(f"    airflow-ft history --dag-id {DAG_ID} --run-id {runs['with faults']}")
            say(
                f"    airflow-ft restart-region --dag-id {DAG_ID} "
                f"--run-id {runs['with faults']} --task enrich_orders"
            )
            say("Press Ctrl-C to stop Airflow and the S3 endpoint.")
            while infra.airflow.is_alive():
                time.sleep(1)
            say("Airflow stopped unexpectedly; see " + str(infra.airflow.log_dir))
    except KeyboardInterrupt:
        say("\nInterrupted.")
    finally:
        infra.stop()
        say("Stopped everything.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
