"""A run's manifest index (``partitions/manifest_index.py``) on the S3 endpoint: a whole-run read of an
ended run is one listing and one GET, and a stale, damaged or foreign index never changes what is read."""

from __future__ import annotations

import json

import pytest

from airflow_ft_provider.partitions import PartitionRef, RunRef
from airflow_ft_provider.partitions.manifest_cache import MANIFESTS
from airflow_ft_provider.partitions.manifest_index import ManifestIndex
from ft_harness.data.partition_files import RUN_ID
from tests.unit.partitions.test_manifest_cache_disk import s3_calls
from tests.unit.partitions.test_store import commit_version

pytestmark = pytest.mark.s3

RUN = RunRef("etl", RUN_ID)
WANTED = [f"load[{i}]" for i in range(5)]


@pytest.fixture(autouse=True)
def fresh_process():
    """Each read below is a new process's (a CLI command): nothing in the process's manifest cache."""
    MANIFESTS.clear()
    yield
    MANIFESTS.clear()


@pytest.fixture
def ended_run(store, tmp_path):
    """Five committed partitions, indexed as the run's end indexes them; what S3 itself says of them."""
    for i in range(5):
        commit_version(store, PartitionRef("etl", RUN_ID, "load", i), tmp_path, 1, count=2)
    commit_version(
        store, PartitionRef("etl", RUN_ID, "total"), tmp_path, 1, count=2
    )  # unmapped: map index -1
    assert store.write_manifest_index(RUN).indexed == 6
    truth = store.check_availability("etl", RUN_ID, WANTED)
    MANIFESTS.clear()
    return truth


def test_an_ended_runs_manifests_are_one_get(store, ended_run):
    calls = s3_calls(store)
    report = store.check_availability("etl", RUN_ID, [*WANTED, "total"], index=True)
    assert calls == ["ListObjectsV2", "GetObject"]  # the index, not six manifests
    assert report.available == {*WANTED, "total"}
    assert {p: m for p, m in report.manifests.items() if p != "total"} == ended_run.manifests
    assert report.manifests["total"].ref == RUN.parse("total")


def test_failover_decisions_do_not_read_the_index(store, ended_run):
    calls = s3_calls(store)
    store.check_availability("etl", RUN_ID, WANTED)
    assert calls == ["ListObjectsV2"] + ["GetObject"] * 5


def test_a_reload_with_every_manifest_in_memory_skips_the_index(store, ended_run):
    store.check_availability("etl", RUN_ID, WANTED, index=True)
    calls = s3_calls(store)
    store.check_availability("etl", RUN_ID, WANTED, index=True)
    assert calls == ["ListObjectsV2"]


def test_a_manifest_committed_after_the_index_is_read_from_s3(store, ended_run, tmp_path):
    ref = PartitionRef("etl", RUN_ID, "load", 3)
    commit_version(store, ref, tmp_path / "v2", 2, count=4, try_number=2)  # the run cleared, load[3] again
    calls = s3_calls(store)
    report = store.check_availability("etl", RUN_ID, WANTED, index=True)
    assert calls == ["ListObjectsV2", "GetObject", "GetObject"]  # the index, then load[3]'s new manifest
    assert (
        report.manifests["load[3]"].producer.try_number == 2 and len(report.manifests["load[3]"].files) == 4
    )
    assert {p: m for p, m in report.manifests.items() if p != "load[3]"} == {
        p: m for p, m in ended_run.manifests.items() if p != "load[3]"
    }


def test_a_run_that_ends_again_reads_only_the_manifests_committed_since(store, ended_run, tmp_path):
    commit_version(store, PartitionRef("etl", RUN_ID, "load", 3), tmp_path / "v2", 2, count=4, try_number=2)
    calls = s3_calls(store)
    written = store.write_manifest_index(RUN)
    assert calls == ["ListObjectsV2", "GetObject", "GetObject", "PutObject"]  # old index, load[3], new index
    assert (written.indexed, written.kept, written.left_out) == (6, 5, 0)
    MANIFESTS.clear()
    calls.clear()
    report = store.check_availability("etl", RUN_ID, WANTED, index=True)
    assert calls == ["ListObjectsV2", "GetObject"] and report.manifests["load[3]"].producer.try_number == 2


def test_manifests_not_read_within_the_budget_are_left_out_and_read_by_readers(store, tmp_path):
    for i in range(5):
        commit_version(store, PartitionRef("etl", RUN_ID, "load", i), tmp_path, 1, count=2)
    written = store.write_manifest_index(RUN, budget=0.0)
    assert written.indexed + written.left_out == 5 and written.kept == 0
    MANIFESTS.clear()
    calls = s3_calls(store)
    report = store.check_availability("etl", RUN_ID, WANTED, index=True)
    assert calls == ["ListObjectsV2", "GetObject"] + ["GetObject"] * written.left_out
    assert report.available == set(WANTED)


def test_a_damaged_manifest_is_left_out_and_the_others_are_indexed(store, ended_run):
    key = store.objects.blocking(RUN.parse("load[2]")).manifest_key
    store.client.put_object(Bucket=store.bucket, Key=key, Body=b"\xff\xfe not a manifest")  # not even UTF-8
    written = store.write_manifest_index(RUN)
    assert (written.indexed, written.left_out) == (5, 1)
    MANIFESTS.clear()
    calls = s3_calls(store)
    report = store.check_availability("etl", RUN_ID, WANTED, index=True)
    assert calls == ["ListObjectsV2", "GetObject", "GetObject"]  # the index, then load[2]'s from S3
    assert report.unavailable_ids == {"load[2]"} and "manifest" in report.unavailable["load[2]"].explanation


def test_no_index_reads_every_manifest(store, tmp_path):
    for i in range(2):
        commit_version(store, PartitionRef("etl", RUN_ID, "load", i), tmp_path, 1, count=2)
    calls = s3_calls(store)
    report = store.check_availability("etl", RUN_ID, WANTED[:2], index=True)
    assert calls == ["ListObjectsV2", "GetObject", "GetObject", "GetObject"]  # the index's 404, then both
    assert report.available == set(WANTED[:2])


def index_doc(store):
    raw = store.client.get_object(Bucket=store.bucket, Key=store.indexes.key(RUN))["Body"].read()
    return json.loads(raw)


def put_index(store, doc):
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    store.client.put_object(Bucket=store.bucket, Key=store.indexes.key(RUN), Body=body)


def test_an_entry_whose_bytes_are_not_the_listed_object_is_not_used(store, ended_run):
    doc = index_doc(store)
    by_key = {e["key"]: e for e in doc["manifests"]}
    first, second = by_key["load/0/manifest.json"], by_key["load/1/manifest.json"]
    # Under their own ETags (MD5s of S3's objects): load[0]'s bytes changed, load[1] holds load[2]'s
    first["manifest"] = first["manifest"].replace('"row_count": 2', '"row_count": 99')
    second["manifest"] = by_key["load/2/manifest.json"]["manifest"]
    put_index(store, doc)
    calls = s3_calls(store)
    report = store.check_availability("etl", RUN_ID, WANTED, index=True)
    assert calls == ["ListObjectsV2", "GetObject", "GetObject", "GetObject"]  # load[0] and load[1] again
    assert report.manifests == ended_run.manifests


@pytest.mark.parametrize(
    "damage",
    [
        b'{"version": 1, "manifests": [',
        {"version": 2, "pipeline": "etl", "run_id": RUN_ID, "manifests": []},
        {"version": 1, "pipeline": "other", "run_id": RUN_ID, "manifests": []},
        {"version": 1, "pipeline": "etl", "run_id": RUN_ID, "manifests": {}},
        {
            "version": 1,
            "pipeline": "etl",
            "run_id": RUN_ID,
            "manifests": [{"key": "../../x/manifest.json", "etag": "e", "manifest": "{}"}],
        },
        {
            "version": 1,
            "pipeline": "etl",
            "run_id": RUN_ID,
            "manifests": [{"key": "load/0/attempts/a/part-0", "etag": "e", "manifest": "{}"}],
        },
        {
            "version": 1,
            "pipeline": "etl",
            "run_id": RUN_ID,
            "manifests": [{"key": "load/-2/manifest.json", "etag": "e", "manifest": "{}"}],
        },
    ],
    ids=[
        "not-json",
        "another-version",
        "another-run",
        "not-a-list",
        "escaping-key",
        "not-a-manifest-key",
        "not-a-map-index",
    ],
)
def test_an_invalid_index_is_said_and_every_manifest_is_read(store, ended_run, damage, caplog):
    put_index(store, damage)
    calls = s3_calls(store)
    report = store.check_availability("etl", RUN_ID, WANTED, index=True)
    assert calls == ["ListObjectsV2", "GetObject"] + ["GetObject"] * 5
    assert report.manifests == ended_run.manifests
    assert (
        "manifest index" in caplog.text
        and "is invalid" in caplog.text
        and store.indexes.key(RUN) in caplog.text
    )


def test_an_entry_under_an_etag_that_is_no_md5_is_still_validated_as_the_partitions_manifest(
    store, ended_run
):
    """SSE-KMS and multipart ETags are no MD5 of the bytes: another partition's manifest there fails
    the manifest's own check and the store's manifest is read instead."""
    from airflow_ft_provider.partitions.manifest_index import IndexedManifest

    objects = store.objects
    load1, load2 = (objects.blocking(PartitionRef("etl", RUN_ID, "load", i)) for i in (1, 2))
    other = objects.manifest_bytes(load2.manifest_key).value
    index = ManifestIndex(RUN, {load1.manifest_key: IndexedManifest("kms-etag-1", other)})
    calls = s3_calls(store)
    manifest = objects.read_manifest(load1, "kms-etag-1", index)
    assert calls == ["GetObject"] and manifest == ended_run.manifests["load[1]"]


def test_keys_are_kept_inside_the_runs_blocking_prefix(store):
    prefix = store.layout.blocking_prefix(RUN)
    doc = {
        "version": 1,
        "pipeline": "etl",
        "run_id": RUN_ID,
        "manifests": [
            {"key": "load/0/manifest.json", "etag": "abc", "manifest": "{}"},
            {"key": "total/-1/manifest.json", "etag": "abd", "manifest": "{}"},
        ],
    }
    index = ManifestIndex.from_json(json.dumps(doc).encode(), RUN, prefix)
    assert list(index.entries) == [prefix + "load/0/manifest.json", prefix + "total/-1/manifest.json"]
    assert index.raw(prefix + "load/0/manifest.json", "abc") == b"{}"
    assert index.raw(prefix + "load/0/manifest.json", "another-etag") is None


def test_releasing_the_run_deletes_its_index(store, ended_run):
    store.release_run("etl", RUN_ID)
    assert store.list_objects(store.indexes.key(RUN)) == {}
