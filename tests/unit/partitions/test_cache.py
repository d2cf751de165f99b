"""Task-local recovery: a local copy is used only when it matches the manifest; S3 is ground truth."""

from __future__ import annotations

import os
import time

import pytest

from airflow_ft_provider.partitions import LocalPartitionCache, PartitionRef, Producer
from ft_harness.data.partition_files import RUN_ID, read_all, version_files, write_files

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


def cache_bytes(root):
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_the_cache_stays_within_its_bound_and_keeps_the_most_recently_used(make_store, tmp_path):
    #   five partitions of ~3 files each through a cache that holds about two of them
    root = tmp_path / "cache"
    size_of_one = sum(len(v) for v in version_files(1, 3).values())
    bound = int(size_of_one * 2.5)
    store = make_store(cache=LocalPartitionCache(root, max_bytes=bound, grace=0))
    refs = [PartitionRef("etl", RUN_ID, f"orders{i}", 0) for i in range(5)]
    for i, ref in enumerate(refs):
        store.commit(
            ref, write_files(tmp_path / f"src{i}", version_files(1, 3)), producer=Producer("p", 0, 1)
        )
        assert cache_bytes(root) <= bound, f"after commit {i}"
        if i >= 1:  # orders0 is read again after every commit: the least recently used go first
            assert store.fetch(refs[0], tmp_path / f"read{i}").cache_hits == 3
            assert cache_bytes(root) <= bound
    assert store.fetch(refs[4], tmp_path / "last").cache_hits == 3  # the newest is kept
    assert store.fetch(refs[1], tmp_path / "old").downloaded == 3  # an old one was trimmed: from S3 again
    assert cache_bytes(root) <= bound


def test_old_files_are_trimmed_and_recently_used_ones_are_kept_whatever_the_bound(tmp_path):
    root = tmp_path / "cache"
    old, recent = root / "b" / "old.parquet", root / "b" / "recent.parquet"
    for path in (old, recent):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 100)
    week_ago = time.time() - 8 * 86_400
    os.utime(old, (week_ago, week_ago))
    result = LocalPartitionCache(root, max_bytes=0, max_age=7 * 86_400, grace=300).trim()
    assert not old.exists() and recent.exists()  # too old; used within the grace period
    assert (result.removed_files, result.kept_bytes) == (1, 100)
