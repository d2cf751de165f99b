from __future__ import annotations

import pytest

from airflow_ft_provider.partitions import S3PartitionStore


@pytest.fixture
def store(s3_bucket):
    return S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/")
