"""Benchmark of the partition store against a plain boto3 transfer of the same files.

Commits and reads a partition of ~--size-mb MB of Parquet through S3PartitionStore, next to a plain
upload/download of the same files with boto3's transfer manager (same TransferConfig), and times an
availability check of --partitions partitions, counting its S3 calls with a botocore event hook.
Starts its own moto server unless --endpoint is given. Writes bench/results/partition_store.json.

    python bench/bench_partition_store.py --size-mb 512
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
from boto3.s3.transfer import create_transfer_manager
from botocore.config import Config

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.partitions import (  # noqa: E402
    FileEntry,
    Manifest,
    PartitionRef,
    Producer,
    S3PartitionStore,
    default_transfer_config,
)
from airflow_ft_provider.partitions.naming import attempt_dir  # noqa: E402

MB = 1 << 20
RUN_ID = "manual__2026-11-22T04:00:00+00:00"


def make_parquet(directory: Path, size_mb: int, files: int) -> list[Path]:
    """Incompressible rows (random payloads), snappy, so file size ≈ requested size."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(42)
    payload = 1024
    rows = max(1, size_mb * MB // files // (payload + 16))
    paths = []
    for i in range(files):
        blob = rng.bytes(rows * payload)
        table = pa.table(
            {
                "id": pa.array(np.arange(i * rows, (i + 1) * rows, dtype=np.int64)),
                "value": pa.array(rng.random(rows)),
                "payload": pa.FixedSizeBinaryArray.from_buffers(
                    pa.binary(payload), rows, [None, pa.py_buffer(blob)]
                ),
            }
        )
        path = directory / f"part-{i:05d}.snappy.parquet"
        pq.write_table(table, path, compression="snappy")
        paths.append(path)
    return paths


def plain_upload(client, bucket: str, prefix: str, files: list[Path], config) -> None:
    with create_transfer_manager(client, config) as tm:
        futures = [tm.upload(str(p), bucket, prefix + p.name) for p in files]
        for f in futures:
            f.result()


def plain_download(client, bucket: str, prefix: str, files: list[Path], dest: Path, config) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with create_transfer_manager(client, config) as tm:
        futures = [tm.download(bucket, prefix + p.name, str(dest / p.name)) for p in files]
        for f in futures:
            f.result()


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def seed_partitions(client, store: S3PartitionStore, count: int) -> list[str]:
    """``count`` small committed partitions (one file + manifest each), written directly for speed."""
    checksum = "sha256:" + "0" * 64

    def put(i: int) -> None:
        ref = PartitionRef("bench", RUN_ID, "avail", i)
        prefix = store.layout.partition_prefix(ref)
        attempt = f"t1-{uuid.uuid4().hex[:16]}"
        key = attempt_dir(attempt) + "part-00000.parquet"
        client.put_object(Bucket=store.bucket, Key=prefix + key, Body=b"x" * 100)
        manifest = Manifest(
            "bench",
            RUN_ID,
            "avail",
            i,
            "blocking",
            attempt,
            Producer("p", i, 1),
            (FileEntry(key, 100, checksum),),
            "parquet",
            "snappy",
            1,
            time.time(),
        )
        client.put_object(Bucket=store.bucket, Key=prefix + "manifest.json", Body=manifest.to_json())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(count)))
    return [f"avail[{i}]" for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=4, help="runs of each transfer; the best is reported")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--endpoint", help="S3 endpoint URL (default: start a moto server)")
    parser.add_argument("--access-key", default=os.environ.get("AWS_ACCESS_KEY_ID", "bench"))
    parser.add_argument("--secret-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY", "bench"))
    parser.add_argument("--bucket", help="existing bucket to use (default: create one)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "partition_store.json")
    args = parser.parse_args()

    server = None
    if args.endpoint:
        endpoint = args.endpoint
        access_key, secret_key = args.access_key, args.secret_key
    else:
        from ft_harness.services.s3_server import start_moto_server

        server = start_moto_server(auth=False)
        endpoint, access_key, secret_key = server.url, server.access_key, server.secret_key
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        config=Config(max_pool_connections=32),
    )
    bucket = args.bucket or f"ft-bench-{uuid.uuid4().hex[:8]}"
    if not args.bucket:
        client.create_bucket(Bucket=bucket)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ft-bench-"))
    config = default_transfer_config()
    try:
        print(f"generating {args.size_mb} MB of Parquet in {args.files} files ...", flush=True)
        files = make_parquet(work / "src", args.size_mb, args.files)
        total = sum(p.stat().st_size for p in files)
        store = S3PartitionStore(client, f"s3://{bucket}/bench/", transfer_config=config)
        ref = PartitionRef("bench", RUN_ID, "big", 0)
        times: dict[str, list[float]] = {
            k: [] for k in ("plain_upload", "store_commit", "plain_download", "store_fetch")
        }
        for r in range(args.repeat):
            # Alternate which goes first, so page-cache and write-back effects do not favour one side.
            plain_prefix, try_number = f"plain/{r}/", r + 1

            def upload_plain() -> None:
                times["plain_upload"].append(
                    timed(lambda: plain_upload(client, bucket, plain_prefix, files, config))  # noqa: B023  (run now)
                )

            def upload_store() -> None:
                times["store_commit"].append(
                    timed(lambda: store.commit(ref, files, producer=Producer("p", 0, try_number)))  # noqa: B023
                )

            def download_plain() -> None:
                shutil.rmtree(work / "plain", ignore_errors=True)
                times["plain_download"].append(
                    timed(lambda: plain_download(client, bucket, plain_prefix, files, work / "plain", config))  # noqa: B023
                )

            def download_store() -> None:
                shutil.rmtree(work / "store", ignore_errors=True)
                times["store_fetch"].append(timed(lambda: store.fetch(ref, work / "store")))

            order = [upload_plain, upload_store, download_plain, download_store]
            if r % 2:
                order = [upload_store, upload_plain, download_store, download_plain]
            for step in order:
                os.sync()
                step()
            print(f"run {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
        best = {k: min(v) for k, v in times.items()}
        mbps = {k: total / MB / v for k, v in best.items()}

        print(f"seeding {args.partitions} partitions for the availability check ...", flush=True)
        ids = seed_partitions(client, store, args.partitions)
        calls: list[str] = []
        client.meta.events.register("before-call.s3", lambda model, **kw: calls.append(model.name))
        start = time.perf_counter()
        report = store.check_availability("bench", RUN_ID, ids)
        check_seconds = time.perf_counter() - start
        assert len(report.available) == args.partitions, report.unavailable
        by_op = {op: calls.count(op) for op in sorted(set(calls))}

        result = {
            "endpoint": "moto server (local)" if server else endpoint,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "data": {
                "bytes": total,
                "mb": round(total / MB, 1),
                "files": len(files),
                "format": "parquet/snappy",
            },
            "transfer_config": {
                "multipart_threshold_mb": config.multipart_threshold // MB,
                "multipart_chunksize_mb": config.multipart_chunksize // MB,
                "max_concurrency": config.max_concurrency,
            },
            "seconds_best_of": args.repeat,
            "seconds": {k: round(v, 3) for k, v in best.items()},
            "all_runs_seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
            "throughput_mb_per_s": {k: round(v, 1) for k, v in mbps.items()},
            "overhead": {
                "commit_vs_plain_upload": round(best["store_commit"] / best["plain_upload"] - 1, 4),
                "fetch_vs_plain_download": round(best["store_fetch"] / best["plain_download"] - 1, 4),
            },
            "availability_check": {
                "partitions": args.partitions,
                "seconds": round(check_seconds, 3),
                "s3_calls": len(calls),
                "s3_calls_by_operation": by_op,
            },
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if server is not None:
            from ft_harness.services.s3_server import stop_moto_server

            stop_moto_server(server)


if __name__ == "__main__":
    main()
