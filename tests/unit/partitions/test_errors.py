"""Bad input and a broken S3 side give clear errors, and nothing is written."""

from __future__ import annotations

import pytest
from botocore.config import Config

from airflow_ft_provider.partitions import (
    PartitionNotFound,
    PartitionRef,
    PartitionStoreError,
    Producer,
    S3PartitionStore,
)
from ft_harness.data.partition_files import RUN_ID, version_files, write_files
from ft_harness.services.s3_server import free_port

pytestmark = pytest.mark.s3

FAIL_FAST = Config(retries={"total_max_attempts": 1}, connect_timeout=2, read_timeout=5)


def attempt_everything(store, ref, tmp_path):
    """The store's operations, each expected to fail the same way; returns the errors."""
    source = write_files(tmp_path / "src", version_files(1))
    calls = [
        lambda: store.commit(ref, source, producer=Producer("p", 0, 1)),
        lambda: store.fetch(ref, tmp_path / "in"),
        lambda: store.check_availability(ref.pipeline, ref.run_id, [ref.partition_id]),
        lambda: store.check_connection(),
        lambda: store.release_run(ref.pipeline, ref.run_id),
    ]
    errors = []
    for call in calls:
        with pytest.raises(PartitionStoreError) as excinfo:
            call()
        errors.append(excinfo.value)
    return errors


def test_missing_bucket(s3_bucket, ref, tmp_path):
    store = S3PartitionStore(s3_bucket.client(), "s3://ft-no-such-bucket/p/")
    for error in attempt_everything(store, ref, tmp_path):
        assert error.code == "NoSuchBucket" and error.bucket == "ft-no-such-bucket"
        assert "s3://ft-no-such-bucket/" in str(error) and "create the bucket" in str(error)
    names = [b["Name"] for b in s3_bucket.client().list_buckets()["Buckets"]]
    assert "ft-no-such-bucket" not in names


@pytest.mark.parametrize(
    "access_key, code", [(None, "SignatureDoesNotMatch"), ("AKIAWRONGWRONGWRONG1", "InvalidAccessKeyId")]
)
def test_wrong_credentials(s3_bucket, ref, tmp_path, access_key, code):
    secret = "wrong-secret-0123456789"
    client = s3_bucket.client(
        aws_access_key_id=access_key or s3_bucket.endpoint.access_key, aws_secret_access_key=secret
    )
    store = S3PartitionStore(client, s3_bucket.url)
    for error in attempt_everything(store, ref, tmp_path):
        assert error.code == code and error.bucket == s3_bucket.name
        assert secret not in str(error) and s3_bucket.endpoint.secret_key not in str(error)
        assert "AWS connection" in str(error)
    assert s3_bucket.keys() == {}


def test_unreachable_endpoint(s3_bucket, ref, tmp_path):
    client = s3_bucket.client(endpoint_url=f"http://127.0.0.1:{free_port()}", config=FAIL_FAST)
    store = S3PartitionStore(client, s3_bucket.url)
    for error in attempt_everything(store, ref, tmp_path):
        assert error.code == "EndpointConnectionError"
        assert "check endpoint_url" in str(error)
    assert s3_bucket.keys() == {}


def test_invalid_input_fails_before_any_s3_call(tmp_path):
    def no_s3():
        raise AssertionError("no S3 call expected")

    store = S3PartitionStore(no_s3, "s3://ft-bucket/prefix/")
    ref = PartitionRef("etl", RUN_ID, "orders", 0)
    bad_name = write_files(tmp_path / "bad", {"bad name.parquet": b"x"})
    cases = [
        (
            lambda: store.commit(ref, bad_name, producer=Producer("p", 0, 1)),
            "invalid file name 'bad name.parquet'",
        ),
        (lambda: store.commit(ref, tmp_path / "missing", producer=Producer("p", 0, 1)), "is not a directory"),
        (lambda: store.commit(ref, [tmp_path / "nofile"], producer=Producer("p", 0, 1)), "does not exist"),
        (lambda: store.commit(ref, bad_name, producer="p"), "producer must be a Producer"),
        (
            lambda: store.commit(ref, bad_name, producer=Producer("p", 0, 1), format="Parquet!"),
            "invalid format",
        ),
        (lambda: store.commit(ref, bad_name, producer=Producer("p", 0, 1), row_count=-1), "row_count"),
        (lambda: store.check_availability("etl", RUN_ID, ["../x"]), "invalid result name '../x'"),
        (lambda: store.register_consumer("etl", RUN_ID, "a/b"), "invalid consumer 'a/b'"),
        (lambda: store.register_consumer("etl", RUN_ID, "c", ttl=0), "lease ttl"),
        (lambda: store.fetch(ref, execution_id="../exec"), "invalid execution id '../exec'"),
        (lambda: Producer("p", 0, -1), "invalid try number -1"),
        (lambda: S3PartitionStore(no_s3, "s3://ft-bucket/", checksum="md5"), "unknown checksum algorithm"),
        (lambda: S3PartitionStore(no_s3, "s3://ft-bucket/", retention=-1), "retention must be"),
        (lambda: S3PartitionStore(no_s3, "ft-bucket/prefix"), "use s3://bucket/prefix/"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError) as excinfo:
            call()
        assert message in str(excinfo.value)


def test_partition_not_found_names_the_partition_and_reason(store, tmp_path):
    ref = PartitionRef("etl", RUN_ID, "orders")
    with pytest.raises(PartitionNotFound) as excinfo:
        store.manifest(ref)
    assert excinfo.value.partition_id == "orders"
    assert str(excinfo.value).startswith(
        f"partition 'orders' of run etl/{RUN_ID} is unavailable: missing manifest"
    )
