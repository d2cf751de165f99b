"""The store's S3 sessions (partitions/s3_models.py) parse S3's timestamps the fast way, to the same
values botocore's own parser gives."""

from __future__ import annotations

import datetime

import pytest
from botocore.utils import parse_timestamp as botocore_parse

from airflow_ft_provider.partitions.s3_models import boto3_session, parse_timestamp


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-27T23:53:51.000Z",  # S3's XML (ListObjectsV2 LastModified)
        "2026-11-27T23:53:51Z",
        "2026-11-27T23:53:51.123456+01:00",
        "Thu, 27 Nov 2026 23:53:51 GMT",  # a header (HeadObject LastModified): botocore's parser
        "1700000000",
    ],
)
def test_a_timestamp_parses_to_what_botocore_gives(text):
    parsed = parse_timestamp(text)
    assert parsed == botocore_parse(text) and parsed.tzinfo is not None


def test_the_store_s_sessions_make_clients_that_parse_with_it(s3_bucket, monkeypatch):
    from airflow_ft_provider.partitions import s3_models

    parsed = []

    def spy(value):
        parsed.append(value)
        return parse_timestamp(value)

    monkeypatch.setattr(s3_models, "parse_timestamp", spy)
    endpoint = s3_bucket.endpoint
    session = boto3_session(
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
        region_name=endpoint.region,
    )
    client = session.client("s3", endpoint_url=endpoint.url)
    client.put_object(Bucket=s3_bucket.name, Key="stamp", Body=b"x")
    [listed] = client.list_objects_v2(Bucket=s3_bucket.name, Prefix="stamp")["Contents"]
    assert parsed and listed["LastModified"] == botocore_parse(parsed[-1])
    assert abs(listed["LastModified"].timestamp() - datetime.datetime.now().timestamp()) < 300
