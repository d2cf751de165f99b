"""Which objects make a checkpointed stage's output on the executors' data path (spark/object_stream.py):
each micro-batch's run that Spark committed (the newest try's), one task attempt per partition; a
marker that is not one stops the assembly (at the S3 endpoint)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_ft_provider.failover.classification import classify
from airflow_ft_provider.recovery.failure_facts import failure_facts
from airflow_ft_provider.spark.object_stream import (
    InvalidStreamMarker,
    assemble,
    chosen_markers,
    marker_name,
    task_markers,
    try_folder,
)
from airflow_ft_provider.spark.partition_objects import access_options
from airflow_ft_provider.spark.spec import StoreAccess, StoreCredentials
from airflow_ft_provider.spark.written import WrittenFile, encode_written


def marker(batch: int, try_number: int, partition: int, attempt: int = 0) -> str:
    return try_folder(batch, try_number) + marker_name(partition, attempt)


def chosen(keys: list[str], wanted: list[int]) -> list[tuple[int, int, int, int]]:
    return [
        (m.batch_id, m.try_number, m.partition, m.attempt) for m in chosen_markers(task_markers(keys), wanted)
    ]


def test_a_micro_batch_run_again_by_a_later_try_is_taken_from_that_try_alone():
    #   try 1 ran micro-batch 3 in part (partitions 0 and 2) and failed; try 2 ran it whole
    keys = [marker(3, 1, 0), marker(3, 1, 2), marker(3, 2, 0), marker(3, 2, 1), marker(3, 2, 2)]
    assert chosen(keys, [3]) == [(3, 2, 0, 0), (3, 2, 1, 0), (3, 2, 2, 0)]


def test_a_partition_written_by_two_task_attempts_counts_once():
    #   a task retried after a lost executor, and a speculative duplicate: both finished their object
    keys = [marker(0, 1, 0, attempt=1), marker(0, 1, 0, attempt=0), marker(0, 1, 1, attempt=2)]
    assert chosen(keys, [0]) == [(0, 1, 0, 0), (0, 1, 1, 2)]


def test_only_the_wanted_micro_batches_and_a_partition_without_rows_leaves_no_marker():
    keys = [marker(0, 1, 0), marker(1, 1, 0), marker(2, 1, 1), marker(9, 1, 0)]  # 9: past the input
    assert chosen(keys, [0, 1, 2]) == [(0, 1, 0, 0), (1, 1, 0, 0), (2, 1, 1, 0)]
    assert chosen(keys, [2]) == [(2, 1, 1, 0)]  # complete mode: the last micro-batch alone
    assert chosen(keys, [5]) == []  # a micro-batch none of whose partitions had rows


def test_keys_that_are_not_markers_are_not_read_as_ones():
    keys = [
        "b000001/t001/part-00000-a0-0123456789ab.parquet",
        "b000001/t001/_task-p0-a0.json",
        "b000001/_task-p00000-a0.json",
        "../b000001/t001/_task-p00000-a0.json",
        "b000001/t001/_task-p00000-a0.json.tmp",
        marker(1, 12, 3, 4),
    ]
    assert [(m.batch_id, m.try_number, m.partition, m.attempt) for m in task_markers(keys)] == [(1, 12, 3, 4)]


@pytest.mark.s3
def test_a_marker_that_is_not_one_fails_the_assembly_by_name_and_publishes_nothing(s3_bucket):
    #   <stream>b000000/t001/_task-p00000-a0.json  a marker of one object (valid)
    #   <stream>b000001/t001/_task-p00000-a0.json  not JSON: put there by hand, or damaged
    client, bucket = s3_bucket.client(), s3_bucket.name
    stream = f"{s3_bucket.prefix}streams/g1/"
    written = WrittenFile("part-00000-a0-0123456789ab.parquet", size=4, checksum="crc32c:AAAAAA==", rows=1)
    client.put_object(Bucket=bucket, Key=f"{stream}{try_folder(0, 1)}{written.key}", Body=b"PAR1")
    client.put_object(Bucket=bucket, Key=f"{stream}{marker(0, 1, 0)}", Body=encode_written([written]))
    client.put_object(Bucket=bucket, Key=f"{stream}{marker(1, 1, 0)}", Body=b"{not json")
    endpoint = s3_bucket.endpoint
    with pytest.raises(InvalidStreamMarker) as failed:
        assemble(
            f"s3://{bucket}/{stream}",
            f"s3://{bucket}/{s3_bucket.prefix}attempts/a1",
            2,
            complete=False,
            schema=pa.schema([("id", pa.int64())]),
            compression="snappy",
            options=access_options(StoreAccess(endpoint=endpoint.url, region=endpoint.region)),
            credentials=StoreCredentials(endpoint.access_key, endpoint.secret_key),
        )
    assert f"s3://{bucket}/{stream}{marker(1, 1, 0)} is not a marker" in str(failed.value)
    assert f"remove s3://{bucket}/{stream} " in str(failed.value)
    assert s3_bucket.keys("attempts/") == {}  # no object copied, no record: nothing to commit from
    labels = classify(failure_facts(failed.value))
    assert not labels.recoverable and "InvalidStreamMarker" in labels.reason  # every restart meets it
