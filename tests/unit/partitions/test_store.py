"""Commit, read and availability of blocking partitions on a real S3 endpoint (moto server)."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_ft_provider.failover import ResultPartitionType, StageGraph
from airflow_ft_provider.partitions import PartitionNotFound, PartitionRef, Producer, Unavailable
from ft_harness.data.partition_files import RUN_ID, read_all, version_files, write_files

pytestmark = pytest.mark.s3


def commit_version(store, ref, tmp_path, version, count=3, try_number=None):
    source = write_files(tmp_path / f"src-{ref.partition_id}-v{version}", version_files(version, count))
    producer = Producer("producer", ref.map_index, version if try_number is None else try_number)
    return store.commit(ref, source, producer=producer, format="binary", compression="none", row_count=count)


def test_commit_then_fetch_returns_exactly_the_files(store, ref, tmp_path, s3_bucket):
    source = write_files(
        tmp_path / "out",
        {
            "part-0000.parquet": b"a" * 10,
            "day=1/part-0001.parquet": b"b" * 20,
            "part-0002.parquet": b"",  # an empty file is data too
            "_SUCCESS": b"",  # Spark's marker and checksum files are not part of the data
            ".part-0000.parquet.crc": b"crc",
            "_temporary/0/part-9.parquet": b"junk",
        },
    )
    manifest = store.commit(ref, source, producer=Producer("load", 0, 2), row_count=7, compression="zstd")
    assert [f.name for f in manifest.files] == [
        "day=1/part-0001.parquet",
        "part-0000.parquet",
        "part-0002.parquet",
    ]
    assert manifest.row_count == 7 and manifest.format == "parquet" and manifest.compression == "zstd"
    assert manifest.producer == Producer("load", 0, 2) and manifest.attempt_id.startswith("t2-")
    assert store.manifest(ref) == manifest
    fetched = store.fetch(ref, tmp_path / "in")
    assert read_all(fetched.paths) == {
        "part-0001.parquet": b"b" * 20,
        "part-0000.parquet": b"a" * 10,
        "part-0002.parquet": b"",
    }
    assert fetched.paths[0] == tmp_path / "in" / "day=1" / "part-0001.parquet"
    # Only attempt data and the manifest were written, all under the partition's prefix.
    prefix = store.layout.partition_prefix(ref)
    assert sorted(s3_bucket.keys()) == sorted(
        [prefix + "manifest.json"] + [prefix + f.key for f in manifest.files]
    )


def test_fetch_of_a_partition_never_committed_is_partition_not_found(store, ref, tmp_path):
    with pytest.raises(PartitionNotFound) as excinfo:
        store.fetch(ref, tmp_path)
    assert excinfo.value.partition_id == "orders[0]"
    assert excinfo.value.reason is Unavailable.MISSING_MANIFEST
    assert list(tmp_path.iterdir()) == []


def test_empty_partition_is_valid(store, ref, tmp_path):
    (tmp_path / "empty").mkdir()
    manifest = store.commit(ref, tmp_path / "empty", producer=Producer("p", 0, 1), row_count=0)
    assert manifest.files == ()
    assert store.check_availability("etl", RUN_ID, ["orders[0]"]).available == {"orders[0]"}


def _damage(s3_bucket, store, ref, how):
    client = s3_bucket.client()
    manifest = store.manifest(ref)
    key = store.layout.partition_prefix(ref) + manifest.files[1].key
    body = client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
    if how == "delete":
        client.delete_object(Bucket=s3_bucket.name, Key=key)
    elif how == "truncate":
        client.put_object(Bucket=s3_bucket.name, Key=key, Body=body[:-1])
    elif how == "flip":  # same size, different bytes: only a checksum notices
        client.put_object(Bucket=s3_bucket.name, Key=key, Body=bytes([body[0] ^ 1]) + body[1:])
    elif how == "manifest":
        client.put_object(
            Bucket=s3_bucket.name,
            Key=store.layout.partition_prefix(ref) + "manifest.json",
            Body=b'{"schema_version": 99}',
        )


@pytest.mark.parametrize(
    "how, shallow, deep",
    [
        ("delete", Unavailable.MISSING_OBJECT, Unavailable.MISSING_OBJECT),
        ("truncate", Unavailable.SIZE_MISMATCH, Unavailable.SIZE_MISMATCH),
        ("flip", None, Unavailable.CHECKSUM_MISMATCH),
        ("manifest", Unavailable.INVALID_MANIFEST, Unavailable.INVALID_MANIFEST),
    ],
)
def test_damaged_partition_is_unavailable_and_never_read(store, tmp_path, s3_bucket, how, shallow, deep):
    #   orders[0] (damaged)   orders[1] (intact)
    damaged, intact = (PartitionRef("etl", RUN_ID, "orders", i) for i in (0, 1))
    commit_version(store, damaged, tmp_path, 1)
    commit_version(store, intact, tmp_path, 1)
    _damage(s3_bucket, store, damaged, how)

    report = store.check_availability("etl", RUN_ID, ["orders[0]", "orders[1]"])
    assert report.available == ({"orders[1]"} if shallow else {"orders[0]", "orders[1]"})
    if shallow:
        assert report.unavailable["orders[0]"].reason is shallow
    deep_report = store.check_availability("etl", RUN_ID, ["orders[0]", "orders[1]"], deep=True)
    assert deep_report.unavailable_ids == {"orders[0]"}
    assert deep_report.unavailable["orders[0]"].reason is deep

    with pytest.raises(PartitionNotFound) as excinfo:
        store.fetch(damaged, tmp_path / "in")
    assert excinfo.value.reason is deep
    assert excinfo.value.partition_id == "orders[0]"
    assert not [p for p in (tmp_path / "in").rglob("*") if p.is_file()]  # nothing half-read left behind


def test_availability_of_many_partitions_costs_a_listing_and_one_get_per_manifest(store, tmp_path, s3_bucket):
    #   load[0..11] --blocking--> (consumers);  lost[0] never committed
    for i in range(12):
        commit_version(store, PartitionRef("etl", RUN_ID, "load", i), tmp_path, 1, count=2)
    calls = []
    store.client.meta.events.register("before-call.s3", lambda model, **kw: calls.append(model.name))
    wanted = [f"load[{i}]" for i in range(12)] + ["lost[0]"]
    report = store.check_availability("etl", RUN_ID, wanted)
    assert report.available == {f"load[{i}]" for i in range(12)}
    assert report.unavailable["lost[0]"].reason is Unavailable.MISSING_MANIFEST
    assert calls.count("ListObjectsV2") == 1
    assert calls.count("GetObject") == 12
    assert calls.count("HeadObject") == 0 and len(calls) == 13


def test_a_check_again_reads_only_the_manifests_that_changed(store, tmp_path):
    # The failover page lists a run on every load: a manifest read before under the same ETag comes from
    # the process's cache; one a later try rewrote is read again, so a re-commit is never hidden.
    for i in range(6):
        commit_version(store, PartitionRef("etl", RUN_ID, "load", i), tmp_path, 1, count=2)
    wanted = [f"load[{i}]" for i in range(6)]
    first = store.check_availability("etl", RUN_ID, wanted)
    calls = []
    store.client.meta.events.register("before-call.s3", lambda model, **kw: calls.append(model.name))
    again = store.check_availability("etl", RUN_ID, wanted)
    assert calls == ["ListObjectsV2"]
    assert again.available == first.available == set(wanted) and again.manifests == first.manifests

    commit_version(store, PartitionRef("etl", RUN_ID, "load", 2), tmp_path / "v2", 2, count=3, try_number=2)
    calls.clear()
    third = store.check_availability("etl", RUN_ID, wanted)
    assert calls == ["ListObjectsV2", "GetObject"]  # only load[2]'s new manifest
    assert third.manifests["load[2]"].producer.try_number == 2
    assert len(third.manifests["load[2]"].files) == 3
    assert third.manifests["load[0]"] == first.manifests["load[0]"]


def test_a_check_with_a_budget_answers_in_time_and_its_reads_go_on_for_the_next_check(store, tmp_path):
    # The failover page's first load of a big run: what is not read within the budget is pending (not
    # available, not unavailable), and the next check answers from the reads that went on meanwhile.
    from airflow_ft_provider.partitions.manifest_cache import MANIFESTS

    for i in range(8):
        commit_version(store, PartitionRef("etl", RUN_ID, "load", i), tmp_path, 1, count=2)
    wanted = [f"load[{i}]" for i in range(8)]
    MANIFESTS.clear()  # a fresh API server
    reads = threading.Event()
    store.client.meta.events.register("before-call.s3.GetObject", lambda **kw: reads.wait(10) and None)
    started = time.monotonic()
    first = store.check_availability("etl", RUN_ID, [*wanted, "lost[0]"], budget=0.2)
    assert time.monotonic() - started < 2  # it did not wait for the held reads
    assert first.pending == set(wanted) and not first.available and not first.manifests
    assert first.unavailable["lost[0]"].reason is Unavailable.MISSING_MANIFEST  # the listing says so
    reads.set()
    deadline = time.monotonic() + 10
    while (again := store.check_availability("etl", RUN_ID, wanted, budget=0.2)).pending:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert again.available == set(wanted) and len(again.manifests) == 8
    calls = []
    store.client.meta.events.register("before-call.s3", lambda model, **kw: calls.append(model.name))
    assert store.check_availability("etl", RUN_ID, wanted).available == set(wanted)  # no budget: all
    assert calls == ["ListObjectsV2"]  # every manifest from the reads that went on


def test_check_graph_reports_pipelined_results_as_unavailable(store, tmp_path):
    #   src --pipelined--> mid --blocking--> sink
    graph = StageGraph()
    graph.add_stage("src")
    graph.add_stage("mid", parallelism=2)
    graph.add_stage("sink")
    graph.add_result("raw", "src", ResultPartitionType.PIPELINED)
    graph.add_result("agg", "mid", ResultPartitionType.BLOCKING)
    graph.consume("mid", "raw")
    graph.consume("sink", "agg")
    commit_version(store, PartitionRef("etl", RUN_ID, "agg", 0), tmp_path, 1)
    report = store.check_graph(graph, "etl", RUN_ID)
    assert report.available == {"agg[0]"}
    assert {pid: u.reason for pid, u in report.unavailable.items()} == {
        "agg[1]": Unavailable.MISSING_MANIFEST,
        "raw": Unavailable.PIPELINED,
    }


def test_scratch_partitions_are_readable_only_by_their_own_region_execution(store, ref, tmp_path):
    source = write_files(tmp_path / "scratch", version_files(1))
    store.commit(ref, source, producer=Producer("p", 0, 1), execution_id="exec-1")
    assert read_all(store.fetch(ref, tmp_path / "a", execution_id="exec-1").paths) == version_files(1)
    with pytest.raises(PartitionNotFound) as excinfo:
        store.fetch(ref, tmp_path / "b", execution_id="exec-2")
    assert excinfo.value.reason is Unavailable.MISSING_MANIFEST
    with pytest.raises(PartitionNotFound):  # not a blocking partition either
        store.fetch(ref, tmp_path / "c")
    report = store.check_availability("etl", RUN_ID, [], pipelined=["orders[0]"])
    assert report.unavailable["orders[0]"].reason is Unavailable.PIPELINED
    assert store.release_scratch("etl", RUN_ID, "exec-1") == 4
    with pytest.raises(PartitionNotFound):
        store.fetch(ref, tmp_path / "d", execution_id="exec-1")


def test_readers_during_commits_never_see_a_mix(store, ref, tmp_path):
    #   writer: v1 -> v2 -> ... -> v6 (each 5 files)      readers: fetch, fetch, fetch, ...
    commit_version(store, ref, tmp_path, 1, count=5)
    done = threading.Event()
    seen, problems = set(), []

    def read(n):
        i = 0
        while not done.is_set() or i < 2:
            i += 1
            try:
                fetched = store.fetch(ref, tmp_path / f"r{n}-{i}")
            except Exception as exc:
                problems.append(repr(exc))
                continue
            version = fetched.manifest.producer.try_number
            if read_all(fetched.paths) != version_files(version, 5):
                problems.append(f"mixed or partial read at v{version}")
            seen.add(version)

    readers = [threading.Thread(target=read, args=(n,)) for n in range(2)]
    for r in readers:
        r.start()
    for version in range(2, 7):
        commit_version(store, ref, tmp_path, version, count=5)
    done.set()
    for r in readers:
        r.join()
    assert problems == []
    assert seen and seen <= set(range(1, 7))
    assert store.manifest(ref).producer.try_number == 6
