"""The manifest cache's disk tier (``airflow-ft partitions``: a new process each time) on the S3 endpoint."""

from __future__ import annotations

import os

import pytest

from airflow_ft_provider.partitions import PartitionRef
from airflow_ft_provider.partitions.manifest_cache import MANIFESTS, DiskTier
from ft_harness.data.partition_files import RUN_ID
from tests.unit.partitions.test_store import commit_version

pytestmark = pytest.mark.s3

WANTED = [f"load[{i}]" for i in range(5)]


@pytest.fixture
def disk(tmp_path):
    """The process's cache with a disk tier, as the CLI sets it; put back as it was after the test."""
    MANIFESTS.clear()
    MANIFESTS.disk = DiskTier(tmp_path / "manifests")
    yield MANIFESTS.disk
    MANIFESTS.disk = None
    MANIFESTS.clear()


def s3_calls(store):
    calls = []
    store.client.meta.events.register("before-call.s3", lambda model, **kw: calls.append(model.name))
    return calls


def seed(store, tmp_path):
    for i in range(5):
        commit_version(store, PartitionRef("etl", RUN_ID, "load", i), tmp_path, 1, count=2)
    return store.check_availability("etl", RUN_ID, WANTED)  # reads every manifest, keeps their bytes


def test_a_new_process_reads_no_manifest_it_read_before(store, tmp_path, disk):
    first = seed(store, tmp_path)
    MANIFESTS.clear()  # the next command: a new process, nothing in memory
    calls = s3_calls(store)
    again = store.check_availability("etl", RUN_ID, WANTED)
    assert calls == ["ListObjectsV2"]
    assert again.available == set(WANTED) and again.manifests == first.manifests


def test_a_rewritten_manifest_is_read_again(store, tmp_path, disk):
    seed(store, tmp_path)
    commit_version(store, PartitionRef("etl", RUN_ID, "load", 3), tmp_path / "v2", 2, count=4, try_number=2)
    MANIFESTS.clear()
    calls = s3_calls(store)
    again = store.check_availability("etl", RUN_ID, WANTED)
    assert calls == ["ListObjectsV2", "GetObject"]  # only load[3]'s new manifest (a new ETag)
    assert again.manifests["load[3]"].producer.try_number == 2 and len(again.manifests["load[3]"].files) == 4


def test_a_damaged_or_foreign_file_on_disk_is_read_from_s3_instead(store, tmp_path, disk):
    first = seed(store, tmp_path)
    files = sorted(disk.folder.glob("*.json"))
    assert len(files) == 5
    by_content = {f: f.read_bytes() for f in files}
    files[0].write_bytes(b'{"not": "a manifest"')  # damaged
    files[1].write_bytes(by_content[files[2]])  # another partition's manifest under this one's name
    MANIFESTS.clear()
    calls = s3_calls(store)
    again = store.check_availability("etl", RUN_ID, WANTED)
    assert calls == ["ListObjectsV2", "GetObject", "GetObject"]
    assert again.manifests == first.manifests  # each partition's own, validated as S3's


def test_the_tier_is_private_and_bounded(tmp_path):
    folder = tmp_path / "manifests"
    DiskTier(folder)
    assert folder.stat().st_mode & 0o777 == 0o700
    for n in range(10):
        path = folder / f"{n:064x}.json"
        path.write_bytes(b"{}")
        os.utime(path, (n, n))  # written in this order
    DiskTier(folder, max_files=4)
    assert sorted(p.name for p in folder.glob("*.json")) == [f"{n:064x}.json" for n in range(6, 10)]
