"""Overhead of persistence: a stage writing its output through the partition store vs straight to local disk.

A SparkStageOperator stage lets Spark write its output to local staging and then commits it as a
blocking partition (upload with checksums + manifest), which is what makes failover possible without
re-running producers. This measures what that costs a stage in wall time. Target: ≤ 10 %.

Both variants run the same PySpark application (spark-submit of the venv, master local[1], the
test suite's Spark environment incl. its JVM class-data-sharing archive): it generates --rows rows
(id, a random double, a small category, two hex digests: ~110 incompressible bytes a row) and writes
them as snappy Parquet in --files files.
(a) baseline: spark-submit writing straight to a local directory; wall time = spark-submit.
(b) store: spark-submit writing to a local staging directory, then
    ``S3PartitionStore(client, "s3://<bucket>/pipelines/").commit(ref, dir, producer=...,
    compression="snappy", row_count=N)`` as ``SparkStageOperator._commit_outputs`` does (new boto3
    client, as a task makes);
    wall time = spark-submit + commit.
The store is a moto S3 server over HTTP on the same machine: it competes for the same cores, so the
commit is slower here than against a real S3 endpoint. One uncounted warm-up spark-submit, then the
variants alternate (a b, b a, ...), --repeats each, os.sync() before each run. Spark's own run-to-run
spread is about ±10 %, so besides best/median of each variant it prints the median commit over the
median of all spark-submits, and CPU seconds (spark-submit + JVM; the commit in this process; moto).
Writes bench/results/persistence_overhead.json.

    python bench/bench_persistence_overhead.py --rows 1500000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MB = 1 << 20
APP = """import sys
from pyspark.sql import SparkSession
out, rows, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spark = SparkSession.builder.getOrCreate()
df = spark.range(0, rows, 1, files).selectExpr(
    "id", "rand(42) AS value", "CAST(id % 97 AS INT) AS category",
    "sha2(CAST(id AS STRING), 256) AS digest", "md5(CAST(id AS STRING)) AS tag")
df.write.mode("overwrite").option("compression", "snappy").parquet(out)
spark.stop()
"""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int) -> float:
    """CPU seconds of another process (the moto server), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spark_submit(app: Path, out: Path, rows: int, files: int, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (spark-submit and its JVM) of one run of the stage's application."""
    from ft_harness.services.spark_env import SPARK_HOME

    cmd = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=1",
        str(app),
        str(out),
        str(rows),
        str(files),
    ]
    start, cpu = time.perf_counter(), children_cpu()
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, children_cpu() - cpu
    if result.returncode:
        raise RuntimeError(f"spark-submit exited {result.returncode}:\n{result.stderr[-3000:]}")
    return elapsed, cpu


def data_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if not p.name.startswith(("_", ".")))


def commit(server, bucket: str, directory: Path, rows: int, try_number: int) -> tuple[float, float, float]:
    """The operator's commit of one blocking output, with a new client as a task process would make.
    Wall seconds, CPU seconds of this (the worker's) process, CPU seconds of the moto server."""
    import boto3
    from botocore.config import Config

    from airflow_ft_provider.partitions import Producer, RunRef, S3PartitionStore

    start, cpu, moto_cpu = time.perf_counter(), time.process_time(), process_cpu(server.process.pid)
    client = boto3.session.Session().client(
        "s3",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        config=Config(retries={"mode": "standard"}, max_pool_connections=16),
    )
    store = S3PartitionStore(client, f"s3://{bucket}/pipelines/")
    ref = RunRef("bench", "run1").parse("out")
    manifest = store.commit(
        ref, directory, producer=Producer("write_stage", -1, try_number), compression="snappy", row_count=rows
    )
    elapsed, cpu, moto_cpu = (
        time.perf_counter() - start,
        time.process_time() - cpu,
        process_cpu(server.process.pid) - moto_cpu,
    )
    assert manifest.row_count == rows and manifest.total_size == data_bytes(directory), manifest
    return elapsed, cpu, moto_cpu


def empty_bucket(client, bucket: str) -> None:
    """Keep moto's memory flat between runs (not timed)."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", ())]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def stats(values: list[float]) -> dict:
    return {
        "best_s": round(min(values), 2),
        "median_s": round(statistics.median(values), 2),
        "all_s": [round(v, 2) for v in values],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_500_000, help="rows written by the stage (~110 B each)")
    parser.add_argument("--files", type=int, default=4, help="Parquet files (Spark partitions) of the output")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each variant")
    parser.add_argument(
        "--output", type=Path, default=REPO / "bench" / "results" / "persistence_overhead.json"
    )
    args = parser.parse_args()

    from ft_harness.services.s3_server import start_moto_server, stop_moto_server
    from ft_harness.services.spark_env import spark_environment

    env = spark_environment()
    load_at_start = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="ft-bench-persist-"))
    server = None
    try:
        server = start_moto_server(auth=False)
        bucket = f"ft-bench-{uuid.uuid4().hex[:8]}"
        admin = server.client()
        admin.create_bucket(Bucket=bucket)
        app = work / "write_stage.py"
        app.write_text(APP)
        times: dict[str, list[float]] = {"baseline": [], "store": [], "store_spark": [], "commit": []}
        cpus: dict[str, list[float]] = {"spark_baseline": [], "spark_store": [], "commit": [], "moto": []}
        sizes, loads = [], []

        def baseline() -> None:
            out = work / "baseline" / "out"
            wall, cpu = spark_submit(app, out, args.rows, args.files, env)
            times["baseline"].append(wall)
            cpus["spark_baseline"].append(cpu)
            sizes.append(data_bytes(out))
            shutil.rmtree(out.parent)

        def through_store(try_number: int) -> None:
            staging = work / "staging" / "out"
            spark, spark_cpu = spark_submit(app, staging, args.rows, args.files, env)
            committed, commit_cpu, moto_cpu = commit(server, bucket, staging, args.rows, try_number)
            cpus["spark_store"].append(spark_cpu)
            cpus["commit"].append(commit_cpu)
            cpus["moto"].append(moto_cpu)
            times["store_spark"].append(spark)
            times["commit"].append(committed)
            times["store"].append(spark + committed)
            sizes.append(data_bytes(staging))
            shutil.rmtree(staging.parent)
            empty_bucket(admin, bucket)

        print(
            f"{args.rows} rows in {args.files} files, local[1]; moto S3 server on the same "
            f"{os.cpu_count()} cores",
            flush=True,
        )
        warm_up = spark_submit(app, work / "warm-up", args.rows, args.files, env)[
            0
        ]  # page cache, JVM archive
        shutil.rmtree(work / "warm-up")
        print(f"warm-up spark-submit (not counted): {warm_up:.2f} s", flush=True)
        for r in range(args.repeats):
            steps = [baseline, lambda r=r: through_store(r + 1)]
            for step in steps if r % 2 == 0 else steps[::-1]:
                os.sync()
                step()
            loads.append(round(os.getloadavg()[0], 2))  # ~1-2 from this benchmark itself; more: other work
            print(
                f"run {r + 1}: baseline {times['baseline'][-1]:.2f} s; store {times['store'][-1]:.2f} s "
                f"(spark-submit {times['store_spark'][-1]:.2f} s + commit {times['commit'][-1]:.2f} s); "
                f"load {loads[-1]}",
                flush=True,
            )

        size = statistics.median(sizes)
        overhead = {
            k: round(stats(times["store"])[k] / stats(times["baseline"])[k] - 1, 4)
            for k in ("best_s", "median_s")
        }
        # The Spark part is the same program in both variants: the commit over all its runs is a steadier
        # estimate.
        spark_runs = times["baseline"] + times["store_spark"]
        commit_share = round(statistics.median(times["commit"]) / statistics.median(spark_runs), 4)
        result = {
            "store": "moto S3 server over HTTP on the same machine "
            "(shares its cores with Spark and the commit)",
            "machine": {
                "cpus": os.cpu_count(),
                "load_avg_1min_at_start": round(load_at_start, 2),
                "load_avg_1min_after_each_run": loads,
            },
            "spark": "spark-submit --master local[1] (ft_harness.services.spark_cluster.spark_environment)",
            "data": {
                "rows": args.rows,
                "files": args.files,
                "bytes": int(size),
                "mb": round(size / MB, 1),
                "format": "parquet/snappy",
            },
            "repeats": args.repeats,
            "baseline_local_disk": stats(times["baseline"]),
            "through_store": stats(times["store"]),
            "through_store_spark_submit_part": stats(times["store_spark"]),
            "commit_alone": stats(times["commit"]),
            "commit_mb_per_s": {
                "best": round(size / MB / min(times["commit"]), 1),
                "median": round(size / MB / statistics.median(times["commit"]), 1),
            },
            "all_spark_submits": stats(spark_runs),
            "cpu_seconds_median": {
                "spark_submit": round(statistics.median(cpus["spark_baseline"] + cpus["spark_store"]), 2),
                "spark_submit_baseline": round(statistics.median(cpus["spark_baseline"]), 2),
                "spark_submit_store": round(statistics.median(cpus["spark_store"]), 2),
                "commit_worker": round(statistics.median(cpus["commit"]), 2),
                "commit_moto_server": round(statistics.median(cpus["moto"]), 2),
            },
            "overhead": {
                "best": overhead["best_s"],
                "median": overhead["median_s"],
                "median_commit_over_median_spark_submit": commit_share,
            },
            "target_overhead": 0.10,
            "target_met": overhead["median_s"] <= 0.10,
        }
        print(f"\ndata: {result['data']['mb']} MB of snappy Parquet ({args.rows} rows, {args.files} files)")
        for label, key in (
            ("baseline (local disk)", "baseline_local_disk"),
            ("through the store", "through_store"),
            ("  of which commit", "commit_alone"),
        ):
            print(
                f"{label:22s} best {result[key]['best_s']:6.2f} s  median {result[key]['median_s']:6.2f} s  "
                f"{result[key]['all_s']}"
            )
        print(
            f"commit throughput: best {result['commit_mb_per_s']['best']} MB/s, median "
            f"{result['commit_mb_per_s']['median']} MB/s (moto on the same {os.cpu_count()} cores)"
        )
        print(
            f"overhead: best {overhead['best_s']:+.1%}, median {overhead['median_s']:+.1%} "
            f"(target ≤ 10 %: {'met' if result['target_met'] else 'NOT met'})"
        )
        print(
            f"steadier estimate: median commit / median of all {len(spark_runs)} spark-submits "
            f"({statistics.median(spark_runs):.2f} s, spread {min(spark_runs):.2f}-{max(spark_runs):.2f} s) "
            f"= {commit_share:+.1%}"
        )
        cpu = result["cpu_seconds_median"]
        print(
            f"CPU seconds (median; insensitive to other load): spark-submit {cpu['spark_submit']:.2f} s, "
            f"commit "
            f"in the worker {cpu['commit_worker']:.2f} s "
            f"(+{cpu['commit_worker'] / cpu['spark_submit']:.1%}), "
            f"moto serving it {cpu['commit_moto_server']:.2f} s; spark-submit CPU baseline "
            f"{cpu['spark_submit_baseline']:.2f} s vs store {cpu['spark_submit_store']:.2f} s"
        )
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written to {args.output}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if server is not None:
            stop_moto_server(server)


if __name__ == "__main__":
    main()
