"""The Airflow hook builds the store from an ``aws`` connection (login/password, extra endpoint_url)."""

from __future__ import annotations

import json

import boto3
import pytest

from airflow_ft_provider.partitions import PartitionRef, Producer
from ft_harness.data.partition_files import RUN_ID, read_all, version_files, write_files

pytestmark = pytest.mark.s3


def set_connection(monkeypatch, conn_id, **fields):
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_hook_store_commits_and_reads_through_the_connection(monkeypatch, s3_bucket, tmp_path, caplog):
    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    endpoint = s3_bucket.endpoint
    set_connection(
        monkeypatch,
        "ft_s3",
        conn_type="aws",
        login=endpoint.access_key,
        password=endpoint.secret_key,
        extra={"endpoint_url": endpoint.url, "region_name": "us-east-1"},
    )
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL", s3_bucket.url + "hooked/")
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_ORPHAN_GRACE", "10 min")
    caplog.set_level("DEBUG")
    hook = PartitionStoreHook(aws_conn_id="ft_s3", cache_dir=str(tmp_path / "cache"))
    assert hook.test_connection() == (True, "partition store bucket is reachable")
    store = hook.get_store()
    assert store.layout.url == s3_bucket.url + "hooked/" and store.orphan_grace == 600
    ref = PartitionRef("etl", RUN_ID, "orders", 0)
    store.commit(ref, write_files(tmp_path / "src", version_files(1)), producer=Producer("p", 0, 1))
    assert read_all(store.fetch(ref).paths) == version_files(1)
    assert endpoint.secret_key not in caplog.text


def test_hook_reports_bad_connections(monkeypatch, s3_bucket):
    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    endpoint = s3_bucket.endpoint
    set_connection(
        monkeypatch,
        "ft_bad",
        conn_type="aws",
        login=endpoint.access_key,
        password="not-the-secret",
        extra={"endpoint_url": endpoint.url},
    )
    ok, message = PartitionStoreHook("ft_bad", url=s3_bucket.url).test_connection()
    assert not ok and "SignatureDoesNotMatch" in message and "not-the-secret" not in message

    set_connection(monkeypatch, "ft_http", conn_type="http", host="example.com")
    with pytest.raises(ValueError, match="has type 'http'; the partition store needs an 'aws' connection"):
        PartitionStoreHook("ft_http", url=s3_bucket.url).get_client()

    monkeypatch.delenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL", raising=False)
    ok, message = PartitionStoreHook("ft_bad").test_connection()
    assert not ok and "no partition store URL" in message


def test_stores_on_the_same_connection_share_one_client_per_process(monkeypatch, s3_bucket):
    from airflow_ft_provider.hooks import partition_store
    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    endpoint = s3_bucket.endpoint
    fields = {
        "conn_type": "aws",
        "login": endpoint.access_key,
        "password": endpoint.secret_key,
        "extra": {"endpoint_url": endpoint.url, "region_name": "us-east-1"},
    }
    set_connection(monkeypatch, "ft_shared_a", **fields)
    set_connection(monkeypatch, "ft_shared_b", **fields)
    set_connection(monkeypatch, "ft_other_secret", **{**fields, "password": "rotated-secret"})
    first = PartitionStoreHook("ft_shared_a", url=s3_bucket.url).get_store()
    again = PartitionStoreHook("ft_shared_b", url=s3_bucket.url).get_store()
    assert first.client is again.client  # same settings: one client
    first.check_connection()
    other = PartitionStoreHook("ft_other_secret", url=s3_bucket.url).get_store()
    assert other.client is not first.client  # a rotated secret gets its own client
    assert not any(
        "rotated-secret" in repr(key) or endpoint.secret_key in repr(key) for key in partition_store._CLIENTS
    )
    monkeypatch.setattr(partition_store.os, "getpid", lambda: -1)  # as in a forked child
    assert PartitionStoreHook("ft_shared_a", url=s3_bucket.url).get_store().client is not first.client


def test_a_role_arn_connection_assumes_the_role_through_sts(monkeypatch, s3_bucket, tmp_path):
    # What production AWS connections use: keys (or an instance role) that may only assume a role. The
    # Amazon provider's AwsBaseHook calls STS (moto's, here) and the store's S3 calls carry the role's
    # temporary credentials, not the connection's keys.
    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    endpoint = s3_bucket.endpoint
    iam = boto3.client(
        "iam",
        endpoint_url=endpoint.url,
        region_name="us-east-1",
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
    )
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    role = iam.create_role(RoleName="ft-partition-store", AssumeRolePolicyDocument=json.dumps(trust))["Role"][
        "Arn"
    ]
    allow = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_role_policy(RoleName="ft-partition-store", PolicyName="store", PolicyDocument=json.dumps(allow))
    set_connection(
        monkeypatch,
        "ft_role",
        conn_type="aws",
        login=endpoint.access_key,
        password=endpoint.secret_key,
        extra={
            "role_arn": role,
            "region_name": "us-east-1",
            "endpoint_url": endpoint.url,
            "service_config": {"sts": {"endpoint_url": endpoint.url}},
        },
    )
    sts_calls = []
    import botocore.client

    original = botocore.client.BaseClient._make_api_call

    def watch(client, operation, params):
        if operation == "AssumeRole":
            sts_calls.append(params["RoleArn"])
        return original(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", watch)
    store = PartitionStoreHook("ft_role", url=s3_bucket.url + "role/").get_store()
    ref = PartitionRef("etl", RUN_ID, "orders", 0)
    store.commit(ref, write_files(tmp_path / "src", version_files(1)), producer=Producer("p", 0, 1))
    assert read_all(store.fetch(ref, tmp_path / "read").paths) == version_files(1)
    assert sts_calls == [role]
    used = store.client._request_signer._credentials.get_frozen_credentials()
    assert used.access_key != endpoint.access_key and used.token  # the role's temporary credentials
