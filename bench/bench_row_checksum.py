"""What the rows' checksum (``spark/content.py``, what output reuse compares) costs a write, each way it
is computed, side by side in one run.

One local Spark Connect server (``local[2]``) and a moto S3 endpoint; --rows rows of the data-path
benchmark's ``generate`` stage (an id, a key, a SHA-256 in hex: ~75 bytes a row), written in 8 Spark
partitions, the ways alternating round by round (the first round warms up):

* executors, no checksum: ``write_objects(..., row_checksum=False)``, the reference of the three below;
* executors, hash column: the executors' path as it writes now (each row's hash one more column of the
  Arrow batches the write step gets, summed there);
* executors, observed: the same write of ``ContentObserver(df).observed`` (Spark's ``observe``, how the
  executors' path computed it before);
* Spark's writer, no checksum / observed: ``df.write.parquet`` to the server's disk (the staged path's
  write), without and with the observation.

Per way: the median wall time and the CPU the Spark server (with its Python workers) and the S3
endpoint spent; each checksum's cost as a share of its reference. Written to
bench/results/row_checksum.json.

    python bench/bench_row_checksum.py --rows 2000000 --rounds 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PARTITIONS = 8


def slug(way: str) -> str:
    """A way's name as a path segment."""
    return way.replace(" ", "-").replace(",", "")


def cpu_seconds(roots: list[psutil.Process]) -> float:
    """CPU of the processes and their descendants, those that ended included (``children_*``)."""
    total = 0.0
    for root in roots:
        for process in [root, *root.children(recursive=True)]:
            try:
                t = process.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system + t.children_user + t.children_system
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "row_checksum.json")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from airflow_ft_provider.spark.content import ContentObserver
    from airflow_ft_provider.spark.partition_objects import access_options, write_objects
    from airflow_ft_provider.spark.spec import StoreAccess, StoreCredentials
    from ft_harness.services.s3_server import start_moto_server, stop_moto_server
    from ft_harness.services.spark_connect import SparkConnectServer

    endpoint = start_moto_server()
    bucket = "bench-row-checksum"
    endpoint.client().create_bucket(Bucket=bucket)
    server = SparkConnectServer().start()
    local = Path(tempfile.mkdtemp(prefix="ft-bench-checksum-"))
    try:
        spark = SparkSession.builder.remote(server.url).create()
        options = access_options(StoreAccess(endpoint=endpoint.url, region=endpoint.region))
        keys = StoreCredentials(endpoint.access_key, endpoint.secret_key)

        def rows():
            return spark.range(0, args.rows, numPartitions=PARTITIONS).selectExpr(
                "id", "id % 1000 AS k", "sha2(cast(id AS STRING), 256) AS pad"
            )

        def to_s3(n: int, name: str, row_checksum: bool, observed: bool) -> str | None:
            observer = ContentObserver(rows()) if observed else None
            frame = observer.observed if observer else rows()
            target = f"s3://{bucket}/{slug(name)}/{n}/"
            written = write_objects(frame, target, options, keys, row_checksum=row_checksum)
            return observer.checksum(written.rows) if observer else written.content

        def to_disk(n: int, name: str, observed: bool) -> str | None:
            observer = ContentObserver(rows()) if observed else None
            frame = observer.observed if observer else rows()
            frame.write.parquet(str(local / f"{slug(name)}-{n}"))
            return observer.checksum(args.rows) if observer else None

        ways = {
            "executors, no checksum": lambda n, w: to_s3(n, w, row_checksum=False, observed=False),
            "executors, hash column": lambda n, w: to_s3(n, w, row_checksum=True, observed=False),
            "executors, observed": lambda n, w: to_s3(n, w, row_checksum=False, observed=True),
            "Spark's writer, no checksum": lambda n, w: to_disk(n, w, observed=False),
            "Spark's writer, observed": lambda n, w: to_disk(n, w, observed=True),
        }
        roots = [psutil.Process(server.process.pid), psutil.Process(endpoint.process.pid)]
        walls: dict[str, list[float]] = {way: [] for way in ways}
        cpus: dict[str, list[float]] = {way: [] for way in ways}
        checksums: dict[str, set[str | None]] = {way: set() for way in ways}
        for n in range(args.rounds + 1):
            for way, write in ways.items():
                cpu, started = cpu_seconds(roots), time.perf_counter()
                checksums[way].add(write(n, way))
                wall, used = time.perf_counter() - started, cpu_seconds(roots) - cpu
                print(f"round {n} {way}: {wall:.2f} s, {used:.2f} CPU-s", flush=True)
                if n:
                    walls[way].append(wall)
                    cpus[way].append(used)
        spark.stop()
    finally:
        server.stop()
        stop_moto_server(endpoint)

    median = {
        way: {
            "wall_s": round(statistics.median(walls[way]), 2),
            "cpu_s": round(statistics.median(cpus[way]), 2),
        }
        for way in ways
    }

    def share(way: str, reference: str) -> dict[str, float]:
        return {key: round(median[way][key] / median[reference][key] - 1, 3) for key in ("wall_s", "cpu_s")}

    computed = {c for way in ways for c in checksums[way] if c}
    result = {
        "rows": args.rows,
        "rounds": args.rounds,
        "median": median,
        "all": {way: {"wall_s": walls[way], "cpu_s": cpus[way]} for way in ways},
        "checksum_cost": {
            "executors, hash column": share("executors, hash column", "executors, no checksum"),
            "executors, observed": share("executors, observed", "executors, no checksum"),
            "Spark's writer, observed": share("Spark's writer, observed", "Spark's writer, no checksum"),
        },
        "same_checksum_every_way": len(computed) == 1,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    if len(computed) != 1:
        sys.exit(f"the ways computed different checksums of the same rows: {checksums}")


if __name__ == "__main__":
    main()
