"""Task-local recovery: a local copy is used only when it matches the manifest; S3 is ground truth."""

from __future__ import annotations

import pytest

from airflow_ft_provider.partitions import LocalPartitionCache, Producer
from ft_harness.partition_files import read_all, version_files, write_files

pytestmark = pytest.mark.s3


@pytest.fixture
def cached_store(make_store, tmp_path):
    return make_store(cache=tmp_path / "cache")


def commit(store, ref, tmp_path):
    return store.commit(ref, write_files(tmp_path / "src", version_files(1, 3)), producer=Producer("p", 0, 1))


def test_commit_keeps_a_local_copy_that_reads_use(cached_store, ref, tmp_path):
    commit(cached_store, ref, tmp_path)
    fetched = cached_store.fetch(ref)
    assert (fetched.cache_hits, fetched.downloaded) == (3, 0)
    assert all(p.is_relative_to(tmp_path / "cache") for p in fetched.paths)
    assert read_all(fetched.paths) == version_files(1, 3)


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete", "grow"])
def test_a_bad_local_copy_falls_back_to_s3_and_is_repaired(cached_store, ref, tmp_path, damage):
    commit(cached_store, ref, tmp_path)
    victim = cached_store.fetch(ref).paths[1]
    data = victim.read_bytes()
    if damage == "flip":  # same size: only the checksum notices
        victim.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])
    elif damage == "truncate":
        victim.write_bytes(data[:10])
    elif damage == "delete":
        victim.unlink()
    else:
        victim.write_bytes(data + b"x")
    fetched = cached_store.fetch(ref, tmp_path / "out")
    assert read_all(fetched.paths) == version_files(1, 3)  # correct data, transparently
    assert (fetched.cache_hits, fetched.downloaded) == (2, 1)
    assert victim.read_bytes() == data  # the cache was repaired from S3
    assert cached_store.fetch(ref).cache_hits == 3


def test_a_worker_with_an_empty_cache_fills_it_from_s3(make_store, ref, tmp_path):
    #   producer (worker A, cache A) --commit--> S3 --fetch--> consumer (worker B, cache B)
    commit(make_store(cache=tmp_path / "cache-a"), ref, tmp_path)
    consumer = make_store(cache=LocalPartitionCache(tmp_path / "cache-b"))
    first = consumer.fetch(ref)
    assert (first.cache_hits, first.downloaded) == (0, 3)
    assert read_all(first.paths) == version_files(1, 3)
    assert consumer.fetch(ref).cache_hits == 3
    assert not [p for p in (tmp_path / "cache-b").rglob("*.tmp")]  # no half-written files left


def test_release_evicts_the_local_copy(cached_store, ref, tmp_path):
    commit(cached_store, ref, tmp_path)
    paths = cached_store.fetch(ref).paths
    cached_store.release_run(ref.pipeline, ref.run_id)
    assert not any(p.exists() for p in paths)
