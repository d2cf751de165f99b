"""The executors' data path (spark/partition_objects.py) in a real local Spark against the S3 endpoint:
each task writes its own object and reports it; only the task attempts Spark committed are listed;
reads verify every object against its entry."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_ft_provider.spark.checksums import new_hasher
from airflow_ft_provider.spark.partition_objects import access_options
from airflow_ft_provider.spark.spec import StoreAccess
from airflow_ft_provider.spark.written import WRITTEN_RECORD, parse_written
from ft_harness.services.spark_cluster import SparkStandalone
from ft_harness.services.spark_env import spark_environment

pytestmark = [pytest.mark.spark, pytest.mark.s3]

APP = Path(__file__).resolve().parents[2] / "apps" / "partition_objects_probe.py"
CONTENT_APP = Path(__file__).resolve().parents[2] / "apps" / "content_probe.py"
ROWS = 1000


def probe(mode, args, env):
    done = subprocess.run(
        [sys.executable, str(APP), mode, json.dumps(args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout.strip().splitlines()[-1:] or [""], done.stderr


def test_executors_write_their_objects_once_per_committed_task_and_reads_verify_them(s3_bucket):
    #   spark.range(1000) in 4 Spark partitions --write_objects--> <attempt prefix>/part-*.parquet
    #   (partition 1's task attempt 0 fails after its object is in S3; attempt 1 writes it again)
    endpoint = s3_bucket.endpoint
    client = s3_bucket.client()
    prefix = f"{s3_bucket.prefix}run/attempts/a1/"
    base = {**spark_environment(), "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    # The write takes its credentials from the executors' environment (an instance role's place)
    executors = {
        **base,
        "AWS_ACCESS_KEY_ID": endpoint.access_key,
        "AWS_SECRET_ACCESS_KEY": endpoint.secret_key,
    }
    target = f"s3://{s3_bucket.name}/{prefix}"
    where = access_options(StoreAccess(endpoint=endpoint.url, region=endpoint.region))
    code, [out], err = probe("write", {"rows": ROWS, "target": target, "access": where}, executors)
    assert code == 0 and json.loads(out) == {"written": ROWS}, err[-3000:]

    record = parse_written(
        client.get_object(Bucket=s3_bucket.name, Key=prefix + WRITTEN_RECORD)["Body"].read()
    )
    assert sum(f.rows for f in record) == ROWS and len(record) == 4
    names = sorted(f.key for f in record)
    assert [n.split("-")[1] for n in names] == ["00000", "00001", "00002", "00003"]  # one per partition
    assert names[1].split("-")[2] == "a1"  # the retried task attempt's, not the lost one's
    stored = s3_bucket.keys("run/attempts/a1/")
    lost = [k for k in stored if "part-00001-a0-" in k]
    assert lost, stored  # the failed attempt's object, its rows in it, reached S3 ... and is in no record
    assert client.head_object(Bucket=s3_bucket.name, Key=s3_bucket.prefix + lost[0])["ContentLength"] > 1000
    for entry in record:
        body = client.get_object(Bucket=s3_bucket.name, Key=prefix + entry.key)["Body"].read()
        hasher = new_hasher(entry.checksum)
        hasher.update(body)
        assert (len(body), f"crc32c:{hasher.hexdigest()}") == (entry.size, entry.checksum)

    # Read back exactly the listed objects, credentials given to the source this time: each row once
    files = json.dumps(
        [{"key": f"{s3_bucket.name}/{prefix}{f.key}", "size": f.size, "checksum": f.checksum} for f in record]
    )
    given = {"access_key": endpoint.access_key, "secret_key": endpoint.secret_key}
    read = {"files": files, "access": where, "credentials": given}
    code, [out], err = probe("read", read, base)
    assert code == 0, err[-3000:]
    assert json.loads(out) == {"rows": ROWS, "ids": ROWS, "total": sum(2 * i for i in range(ROWS))}

    # A listed object changed in place, to the same size: the read refuses it and names it
    key = prefix + record[2].key
    body = client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
    client.put_object(Bucket=s3_bucket.name, Key=key, Body=bytes([body[0] ^ 0xFF]) + body[1:])
    code, _, err = probe("read", read, base)
    assert code != 0 and "PartitionDataCorrupt" in err and record[2].key in err, err[-3000:]
    assert endpoint.secret_key not in err  # the options' secret is not in what Spark printed


def test_the_executors_row_checksum_is_the_one_spark_observes_on_the_staged_path(s3_bucket, tmp_path):
    #   the same seven arrangements of 1,000 rows (tests/apps/content_probe.py), each written by Spark's
    #   own writer with the observed checksum and by the executors (the hash a column of their batches)
    endpoint = s3_bucket.endpoint
    executors = {
        "target": f"s3://{s3_bucket.name}/{s3_bucket.prefix}content/",
        "access": access_options(StoreAccess(endpoint=endpoint.url, region=endpoint.region)),
    }
    env = {
        **spark_environment(),
        "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
        "AWS_ACCESS_KEY_ID": endpoint.access_key,
        "AWS_SECRET_ACCESS_KEY": endpoint.secret_key,
    }
    run = subprocess.run(
        ["spark-submit", "--master", "local[2]", "--conf", "spark.ui.enabled=false", str(CONTENT_APP)]
        + [str(tmp_path), json.dumps(executors)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = [line.split(" ") for line in run.stdout.splitlines()]
    observed = {words[1]: words[2] for words in lines if words[0] == "RESULT"}
    written = {words[1]: (words[2], int(words[3])) for words in lines if words[0] == "EXECUTORS"}
    assert len(observed) == 7 and {case: checksum for case, (checksum, _) in written.items()} == observed
    assert written["one_file"][1] == 1000 and written["a_row_duplicated"][1] == 1001
    assert written["with_a_map"][0] == "None" and written["one_file"][0].startswith("rows1:")
    assert len({checksum for checksum, _ in written.values()}) == 6  # only one_file = shuffled


@pytest.fixture(scope="module")
def one_core_on_the_spark_host(spark_host, tmp_path_factory):
    """A standalone cluster of one worker with one core, on a host of its own (ft_harness/spark_host)."""
    standalone = SparkStandalone(tmp_path_factory.mktemp("one-core"), host=spark_host)
    try:
        yield standalone.start()
    finally:
        standalone.stop()


def test_an_executor_killed_mid_write_adds_no_row_and_no_file_of_its_task_attempt(
    s3_bucket, spark_host, one_core_on_the_spark_host, tmp_path
):
    #   spark.range(40000) in 4 Spark partitions, written one task at a time by the standalone cluster's
    #   one executor (on the Spark host; the driver here); SIGKILL that executor while it writes
    #   partition 1: the master starts another, Spark runs the lost task again there
    from airflow_ft_provider.execution.submit import runtime_zip

    cluster = one_core_on_the_spark_host
    endpoint, client = s3_bucket.endpoint, s3_bucket.client()
    prefix = f"{s3_bucket.prefix}run/attempts/killed/"
    in_host = f"/tmp/ledger-{tmp_path.name}"  # the executors note their batches on their own disk
    ledger = spark_host.path(in_host)
    rows = 40_000
    args = {
        "master": cluster.url,
        "runtime_zip": runtime_zip(tmp_path),
        "rows": rows,
        "rows_per_batch": 1000,
        "seconds_per_batch": 0.25,
        "ledger": in_host,
        "target": f"s3://{s3_bucket.name}/{prefix}",
        "access": access_options(StoreAccess(endpoint=endpoint.url, region=endpoint.region)),
        "credentials": {"access_key": endpoint.access_key, "secret_key": endpoint.secret_key},
    }
    env = {**spark_environment(), "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    writer = subprocess.Popen(
        [sys.executable, str(APP), "slow_write", json.dumps(args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def noted():
        lines = ledger.read_text().split("\n") if ledger.exists() else []
        return [tuple(int(v) for v in line.split()) for line in lines if line]

    deadline = time.monotonic() + 240
    while not [n for n in noted() if n[0] == 1] or len([n for n in noted() if n[0] == 1]) < 3:
        assert writer.poll() is None and time.monotonic() < deadline, writer.communicate()[1][-3000:]
        time.sleep(0.2)
    candidates = subprocess.run(
        ["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True
    ).stdout.split()
    executors = [pid for pid in candidates if os.readlink(f"/proc/{pid}/cwd").startswith(cluster.worker_dir)]
    assert len(executors) == 1, executors  # this cluster's one executor (other tests may run others)
    os.kill(int(executors[0]), signal.SIGKILL)  # partition 0 written, partition 1 half-way
    out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0 and json.loads(out.strip().splitlines()[-1]) == {"written": rows}, err[
        -3000:
    ]

    record = parse_written(
        client.get_object(Bucket=s3_bucket.name, Key=prefix + WRITTEN_RECORD)["Body"].read()
    )
    assert sorted(f.key.split("-")[1] for f in record) == ["00000", "00001", "00002", "00003"]
    assert sum(f.rows for f in record) == rows
    batches = noted()
    recomputed = {(p, a) for p, a, _ in batches if p == 1}
    assert len(recomputed) == 2, recomputed  # partition 1 ran twice: the kill hit it mid-write
    killed_attempt = min(a for _, a in recomputed)
    assert all(f"-a{killed_attempt}-" not in f.key for f in record if f.key.split("-")[1] == "00001")
    listed = {f.key for f in record}
    unlisted = [
        k.rpartition("/")[2] for k in s3_bucket.keys("run/attempts/killed/") if k.endswith(".parquet")
    ]
    unlisted = [name for name in unlisted if name not in listed]
    assert not [n for n in unlisted if n.startswith(f"part-00001-a{killed_attempt}-")]  # the killed upload
    # never completed; what else is unlisted is finished work of the lost executor that Spark computed
    # again, because its shuffle files went with it (no external shuffle service in this cluster)
    assert all("-a0-" in name for name in unlisted), unlisted

    # Read back what the record lists: each row exactly once
    files = json.dumps(
        [{"key": f"{s3_bucket.name}/{prefix}{f.key}", "size": f.size, "checksum": f.checksum} for f in record]
    )
    read = {"files": files, "access": args["access"], "credentials": args["credentials"]}
    code, [out], err = probe("read", read, env)
    assert code == 0, err[-3000:]
    assert json.loads(out) == {"rows": rows, "ids": rows, "total": sum(2 * i for i in range(rows))}
