"""Fixtures for the partition-store tests: a store on a fresh bucket, and files to commit."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from airflow_ft_provider.failover import ManualClock
from airflow_ft_provider.partitions import PartitionRef, S3PartitionStore
from ft_harness.data.partition_files import RUN_ID


@pytest.fixture
def clock() -> ManualClock:
    # S3 stamps LastModified with real time; the store compares it with this clock.
    return ManualClock(time.time())


@pytest.fixture
def make_store(s3_bucket: Any, clock: ManualClock) -> Callable[..., S3PartitionStore]:
    def make(**kwargs: Any) -> S3PartitionStore:
        kwargs.setdefault("clock", clock)
        return S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/", **kwargs)

    return make


@pytest.fixture
def store(make_store: Callable[..., S3PartitionStore]) -> S3PartitionStore:
    return make_store()


@pytest.fixture
def ref() -> PartitionRef:
    return PartitionRef("etl", RUN_ID, "orders", 0)
