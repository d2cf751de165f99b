"""Compare-and-swap of JSON objects on S3 (moto server): no lost update, however many writers."""

from __future__ import annotations

import threading

import pytest

from airflow_ft_provider.partitions import ConditionalJsonStore, ConditionalWriteConflict, PartitionStoreError

pytestmark = pytest.mark.s3


@pytest.fixture
def objects(s3_bucket):
    return ConditionalJsonStore(s3_bucket.client(), s3_bucket.name)


def test_create_only_if_absent_and_replace_only_the_version_read(objects, s3_bucket):
    key = s3_bucket.prefix + "state.json"
    assert objects.get(key) is None
    etag = objects.create(key, {"n": 1})
    with pytest.raises(ConditionalWriteConflict, match="expected absent"):
        objects.create(key, {"n": 99})
    current = objects.get(key)
    assert current.value == {"n": 1} and current.etag == etag
    new_etag = objects.replace(key, {"n": 2}, etag)
    # A writer still holding the first ETag loses, and the value it would have overwritten stays.
    with pytest.raises(ConditionalWriteConflict):
        objects.replace(key, {"n": 99}, etag)
    assert objects.get(key).value == {"n": 2}
    assert objects.get(key).etag == new_etag


def test_replace_of_a_deleted_object_is_a_conflict(objects, s3_bucket):
    key = s3_bucket.prefix + "gone.json"
    etag = objects.create(key, {"n": 1})
    objects.delete(key)
    with pytest.raises(ConditionalWriteConflict):
        objects.replace(key, {"n": 2}, etag)
    assert objects.get(key) is None


def test_concurrent_updates_lose_nothing(s3_bucket):
    #   8 threads x 6 increments --> one counter object; every increment must survive
    key = s3_bucket.prefix + "counter.json"
    writers, increments = 8, 6
    barrier = threading.Barrier(writers)
    errors = []

    def work():
        objects = ConditionalJsonStore(s3_bucket.client(), s3_bucket.name)
        barrier.wait()
        try:
            for _ in range(increments):
                objects.update(key, lambda cur: {"n": (cur or {"n": 0})["n"] + 1})
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert ConditionalJsonStore(s3_bucket.client(), s3_bucket.name).get(key).value == {
        "n": writers * increments
    }


def test_update_returning_none_writes_nothing_and_errors_abort(objects, s3_bucket):
    key = s3_bucket.prefix + "noop.json"
    assert objects.update(key, lambda cur: None) is None
    assert objects.get(key) is None
    objects.create(key, {"n": 1})
    before = objects.get(key)
    assert objects.update(key, lambda cur: None) == before

    def refuse(cur):
        raise RuntimeError("not allowed")

    with pytest.raises(RuntimeError):
        objects.update(key, refuse)
    assert objects.get(key) == before


def test_oversized_or_invalid_objects_are_refused(s3_bucket):
    client = s3_bucket.client()
    objects = ConditionalJsonStore(client, s3_bucket.name, max_bytes=100)
    client.put_object(
        Bucket=s3_bucket.name, Key=s3_bucket.prefix + "big.json", Body=b"[" + b"1," * 100 + b"1]"
    )
    with pytest.raises(PartitionStoreError, match="over the 100-byte limit") as excinfo:
        objects.get(s3_bucket.prefix + "big.json")
    assert excinfo.value.code == "ObjectTooLarge"
    client.put_object(Bucket=s3_bucket.name, Key=s3_bucket.prefix + "bad.json", Body=b"{nope")
    with pytest.raises(PartitionStoreError, match="not valid JSON") as excinfo:
        objects.get(s3_bucket.prefix + "bad.json")
    assert excinfo.value.key == s3_bucket.prefix + "bad.json"
