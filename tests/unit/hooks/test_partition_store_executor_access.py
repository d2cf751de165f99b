"""How Spark's executors reach the store (hooks/partition_store.executor_access) and what the record of
their written files may hold (spark/written.py)."""

import json

import pytest

from airflow_ft_provider.hooks.partition_store import PartitionStoreHook, executor_access
from airflow_ft_provider.spark.spec import StoreAccess, StoreCredentials
from airflow_ft_provider.spark.written import WrittenFile, encode_written, parse_written


def store_on(monkeypatch, extra, *, login="AKIDEXAMPLE", password="s3cr3t-value"):
    connection = {"conn_type": "aws", "login": login, "password": password, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_FT_EXEC_STORE", json.dumps(connection))
    return PartitionStoreHook("ft_exec_store", url="s3://bucket/prefix/").get_store()


def test_the_executors_get_the_connections_endpoint_region_and_keys(monkeypatch):
    monkeypatch.delenv("AIRFLOW__FT_PROVIDER__EXECUTOR_CREDENTIALS", raising=False)
    store = store_on(monkeypatch, {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-3"})
    access, credentials = executor_access(store, "ft_exec_store")
    assert access == StoreAccess(endpoint="http://127.0.0.1:9", region="eu-west-3")
    assert credentials == StoreCredentials("AKIDEXAMPLE", "s3cr3t-value", None)
    assert "s3cr3t-value" not in repr(credentials)  # a log line of it shows no secret


def test_their_own_endpoint_and_aws_itself(monkeypatch):
    extra = {"endpoint_url": "http://worker-side:9", "executor_endpoint_url": "http://spark-side:9"}
    access, _ = executor_access(store_on(monkeypatch, extra), "ft_exec_store")
    assert access.endpoint == "http://spark-side:9"
    aws = {"endpoint_url": "https://s3.eu-west-3.amazonaws.com", "region_name": "eu-west-3"}
    access, _ = executor_access(store_on(monkeypatch, aws), "ft_exec_store")
    assert access == StoreAccess(endpoint=None, region="eu-west-3")  # the executors find AWS themselves


def test_executor_credentials_executor_keeps_every_secret_on_the_worker(monkeypatch):
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__EXECUTOR_CREDENTIALS", "executor")
    _, credentials = executor_access(store_on(monkeypatch, {"region_name": "us-east-1"}), "ft_exec_store")
    assert credentials is None
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__EXECUTOR_CREDENTIALS", "both")
    with pytest.raises(
        ValueError, match=r"\[ft_provider\] executor_credentials must be 'connection'.*'both'"
    ):
        executor_access(store_on(monkeypatch, {"region_name": "us-east-1"}), "ft_exec_store")


FILE = WrittenFile("part-00003-a1-0123456789ab.parquet", 1234, "crc32c:0a0b0c0d", 77)


def test_the_record_round_trips_and_refuses_what_the_writer_never_writes():
    assert parse_written(encode_written([FILE])) == [FILE]
    bad = [
        ({"key": "../escape.parquet"}, "not a file name this writer gives"),
        ({"key": "_ft_written.json"}, "not a file name this writer gives"),
        ({"rows": -1}, "needs size, rows and checksum"),
        ({"size": True}, "needs size, rows and checksum"),
        ({"checksum": "0a0b"}, "needs size, rows and checksum"),
    ]
    for change, says in bad:
        entry = {**json.loads(encode_written([FILE]))["files"][0], **change}
        with pytest.raises(ValueError, match=says):
            parse_written(json.dumps({"version": 1, "files": [entry]}).encode())
    with pytest.raises(ValueError, match="twice"):
        parse_written(encode_written([FILE, FILE]))
    with pytest.raises(ValueError, match="not JSON"):
        parse_written(b"{")
    with pytest.raises(ValueError, match="version-1"):
        parse_written(b'{"version": 2, "files": []}')
