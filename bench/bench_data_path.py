"""Where stage data flows: Spark's executors to S3 (the default), through the worker's disk ("staged"),
and the same Spark jobs writing Parquet to the Spark side's local disk (the limit on this machine).

    generate --generated--> enrich --enriched--> summarize        (bench/data_path/stages.py)

Each way runs the three stages one after the other on one Spark Connect server (local[2]), the stages
driven by SparkStageOperator.execute as a task would (no Airflow scheduling in the figures), against
a moto S3 endpoint. The worker reaches S3 through a counting proxy; with the executors' path the
executors reach it directly (the connection's ``executor_endpoint_url``), so the proxy counts what the
worker moves. Per way: each stage's wall time, the data's throughput (bytes written + read / time) and
the bytes through the worker; then the ratios. Also the crc32c hashing rate of this machine, to put
the file checksums' share of a stage in numbers, and the CPU seconds the S3 endpoint (moto, a Python
server on the same cores as Spark) spent per way: what a real S3 endpoint does not take from Spark.
Figures are medians over the rounds. Written to bench/results/data_path.json.

With ``--two-hosts`` Spark runs on the reference deployment's Spark host instead: a standalone cluster
(one worker, 2 cores) and its Connect server in a mount namespace that shares no disk with this side
(``ft_harness/services/spark_host.py``). The staged path cannot run there (its driver must share the
worker's disk), so two ways; written to bench/results/data_path_two_hosts.json.

    python bench/bench_data_path.py --rows 2000000 --rounds 3
    python bench/bench_data_path.py --rows 15000000 --two-hosts     # 2.2 GB over the three stages
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import types
from pathlib import Path
from statistics import median

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WAYS = ("local disk", "executors", "staged")
WAYS_ON_TWO_HOSTS = ("local disk", "executors")  # staging needs the driver on the worker's disk
STAGES = (
    ("generate", (), "generated"),
    ("enrich", ("generated",), "enriched"),
    ("summarize", ("enriched",), "summary"),
)


class TaskInstance(types.SimpleNamespace):
    def xcom_push(self, key, value):
        self.pushed[key] = value

    def xcom_pull(self, **kwargs):
        return None


def run_pipeline(way: str, run_id: str, store_url: str, proxy) -> dict:
    from airflow.sdk import DAG

    from airflow_ft_provider.operators.spark_stage import SparkStageOperator
    from airflow_ft_provider.partitions import RunRef
    from airflow_ft_provider.pipeline import FailoverPipeline
    from bench.data_path import stages

    with DAG("bench_data_path", schedule=None) as dag:
        with FailoverPipeline(
            store=store_url,
            spark_conn_id="bench_connect",
            data_path="staged" if way == "staged" else "executors",
            restart_strategy={"restart-strategy.type": "none"},
            reuse="off",
        ):
            for name, inputs, output in STAGES:
                SparkStageOperator(
                    task_id=name, python_callable=getattr(stages, name), inputs=list(inputs), outputs=[output]
                )
    seconds, before = {}, proxy.sent + proxy.received
    for name, _, _ in STAGES:
        ti = TaskInstance(map_index=-1, try_number=1, pushed={}, task_id=name, dag_id=dag.dag_id)
        started = time.monotonic()
        dag.task_dict[name].execute({"ti": ti, "dag": dag, "run_id": run_id, "dag_run": None, "params": {}})
        seconds[name] = time.monotonic() - started
    store = dag.task_dict["generate"].store
    run = RunRef("bench_data_path", run_id)
    sizes = {output: store.manifest(run.parse(output)).total_size for _, _, output in STAGES}
    return {"seconds": seconds, "sizes": sizes, "worker_bytes": proxy.sent + proxy.received - before}


def run_local(connect_url: str, root: Path) -> dict:
    from pyspark.sql.connect.session import SparkSession

    from bench.data_path import stages

    spark = SparkSession.builder.remote(connect_url).create()
    io = stages.LocalDiskIO(spark, root.as_uri())
    seconds = {}
    try:
        for name, _, _ in STAGES:
            started = time.monotonic()
            getattr(stages, name)(spark, io)
            seconds[name] = time.monotonic() - started
    finally:
        spark.stop()
    sizes = {
        output: sum(f.stat().st_size for f in (root / output).glob("*.parquet")) for _, _, output in STAGES
    }
    shutil.rmtree(root, ignore_errors=True)
    return {"seconds": seconds, "sizes": sizes, "worker_bytes": 0}


class SparkSide:
    """One Spark Connect server (local[2]) on this machine, or (``two_hosts``) a standalone cluster of
    one 2-core worker and its Connect server on a Spark host of their own (``ft_harness.services.
    spark_host``), where the local-disk reference writes to that host's disk."""

    def __init__(self, *, two_hosts: bool) -> None:
        self.two_hosts = two_hosts
        self.host = self.standalone = self.server = None
        self.folder = Path(tempfile.mkdtemp(prefix="ft-bench-spark-"))

    def start(self):
        from ft_harness.services.spark_cluster import SparkStandalone
        from ft_harness.services.spark_connect import SparkConnectServer
        from ft_harness.services.spark_host import SparkHost

        conf = {"spark.driver.memory": "3g", "spark.sql.shuffle.partitions": "8"}
        if not self.two_hosts:
            self.server = SparkConnectServer(conf=conf).start()
            return self.server
        self.host = SparkHost().start()
        self.standalone = SparkStandalone(self.folder, cores=2, memory="6g", host=self.host)
        cluster = self.standalone.start()
        conf["spark.executor.memory"] = "5g"
        self.server = SparkConnectServer(master=cluster.url, log_dir=self.folder, host=self.host, conf=conf)
        return self.server.start()

    def local_folder(self) -> Path:
        """A new folder on the Spark side's disk (not tmpfs: the Spark host's /tmp is one), seen from here."""
        return Path(tempfile.mkdtemp(prefix="ft-bench-local-", dir="/var/tmp"))

    def stop(self) -> None:
        for part in (self.server, self.standalone, self.host):
            if part is not None:
                part.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def throughput(figures: dict) -> dict[str, float]:
    """Per stage, MB/s of the data it read and wrote."""
    sizes, out = figures["sizes"], {}
    for name, inputs, output in STAGES:
        moved = sizes[output] + sum(sizes[i] for i in inputs)
        out[name] = moved / figures["seconds"][name] / 1e6
    return out


def cpu_seconds(process: psutil.Process | None) -> float:
    """User and system CPU seconds of ``process`` so far (0 without one)."""
    if process is None:
        return 0.0
    times = process.cpu_times()
    return times.user + times.system


def crc32c_rate() -> float:
    """MB/s of this machine's crc32c (the default checksum), over 256 MB in 8 MB chunks."""
    from airflow_ft_provider.spark.checksums import new_hasher

    chunk, hasher = os.urandom(8 << 20), new_hasher("crc32c")
    started = time.monotonic()
    for _ in range(32):
        hasher.update(chunk)
    return 256 * (1 << 20) / (time.monotonic() - started) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument(
        "--two-hosts",
        action="store_true",
        help="Spark on a host of its own (a standalone cluster and its Connect server in a mount namespace "
        "that shares no disk with this side: the reference deployment); the staged path cannot run there",
    )
    args = parser.parse_args()
    name = "data_path_two_hosts.json" if args.two_hosts else "data_path.json"
    args.output = args.output or REPO / "bench" / "results" / name
    from bench.data_path import stages

    stages.ROWS = args.rows

    from ft_harness.services.s3_server import start_moto_server
    from ft_harness.services.tcp_proxy import PausableProxy

    endpoint = start_moto_server()
    bucket = "ft-bench-data-path"
    endpoint.client().create_bucket(Bucket=bucket)
    host, port = endpoint.url.removeprefix("http://").split(":")
    proxy = PausableProxy(host, int(port))
    connection = json.loads(endpoint.aws_connection())
    connection["extra"].update(endpoint_url=proxy.url, executor_endpoint_url=endpoint.url)
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = json.dumps(connection)
    spark_side = SparkSide(two_hosts=args.two_hosts)
    server = spark_side.start()
    os.environ["AIRFLOW_CONN_BENCH_CONNECT"] = json.dumps(server.connection())
    ways = WAYS_ON_TWO_HOSTS if args.two_hosts else WAYS
    results: dict[str, list[dict]] = {way: [] for way in ways}
    moto = psutil.Process(endpoint.process.pid) if endpoint.process else None
    try:
        for n in range(args.rounds):
            for way in ways:
                endpoint_cpu = cpu_seconds(moto)
                if way == "local disk":
                    figures = run_local(server.url, spark_side.local_folder())
                else:
                    figures = run_pipeline(way, f"bench_{way}_{n}", f"s3://{bucket}/bench/", proxy)
                figures["throughput_mb_s"] = throughput(figures)
                figures["endpoint_cpu_s"] = cpu_seconds(moto) - endpoint_cpu
                results[way].append(figures)
                print(way, json.dumps(figures, indent=1), flush=True)
    finally:
        spark_side.stop()
        proxy.close()
        endpoint.process.terminate() if endpoint.process else None
    rate = crc32c_rate()
    summary = {}
    for way, runs in results.items():
        summary[way] = {
            "pipeline_s": round(median(sum(r["seconds"].values()) for r in runs), 2),
            "stage_s": {s: round(median(r["seconds"][s] for r in runs), 2) for s, _, _ in STAGES},
            "throughput_mb_s": {
                s: round(median(r["throughput_mb_s"][s] for r in runs), 1) for s, _, _ in STAGES
            },
            "data_bytes": int(median(sum(r["sizes"].values()) for r in runs)),
            "worker_bytes": int(median(r["worker_bytes"] for r in runs)),
            "endpoint_cpu_s": round(median(r["endpoint_cpu_s"] for r in runs), 2),
        }
    local = summary["local disk"]["pipeline_s"]
    sizes = results["executors"][0]["sizes"]  # each stage hashes what it writes and what it reads
    hashed = sum(sizes[output] + sum(sizes[i] for i in inputs) for _, inputs, output in STAGES)
    staged = summary.get("staged", {}).get("pipeline_s")
    report = {
        "rows": args.rows,
        "rounds": args.rounds,
        "deployment": "two hosts (Spark standalone in a host of its own)" if args.two_hosts else "one host",
        "ways": summary,
        "executors_vs_local_disk_time": round(summary["executors"]["pipeline_s"] / local, 2),
        "executors_vs_local_disk_throughput": round(local / summary["executors"]["pipeline_s"], 2),
        "staged_vs_local_disk_time": round(staged / local, 2) if staged else "cannot run: no shared disk",
        "executors_vs_staged_time": round(summary["executors"]["pipeline_s"] / staged, 2) if staged else None,
        "executors_worker_bytes_share": round(
            summary["executors"]["worker_bytes"] / max(summary["executors"]["data_bytes"], 1), 5
        ),
        "crc32c_mb_s": round(rate, 0),
        "file_checksum_share_estimate": round((hashed / 1e6 / rate) / summary["executors"]["pipeline_s"], 3),
    }
    print(json.dumps(report, indent=1))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
