"""Life cycle: consumers hold partitions; release on request or after retention; orphan clean-up."""

from __future__ import annotations

import pytest

from airflow_ft_provider.partitions import (
    ConsumerRegistrationRefused,
    PartitionNotFound,
    PartitionRef,
    Producer,
    ReleaseRefused,
    RunRef,
)
from ft_harness.data.partition_files import RUN_ID, version_files, write_files

pytestmark = pytest.mark.s3


def commit(store, tmp_path, result="orders", index=0, run_id=RUN_ID, try_number=1):
    ref = PartitionRef("etl", run_id, result, index)
    source = write_files(
        tmp_path / f"src-{run_id[:8]}-{result}-{index}-{try_number}", version_files(try_number, 2)
    )
    store.commit(ref, source, producer=Producer("p", index, try_number))
    return ref


def test_release_is_refused_while_a_consumer_is_registered(store, tmp_path, s3_bucket):
    #   orders[0] --> join[0] (registered, running)
    ref = commit(store, tmp_path)
    store.register_consumer("etl", RUN_ID, "join[0]", partitions=["orders[0]"])
    before = s3_bucket.keys()
    with pytest.raises(ReleaseRefused) as excinfo:
        store.release_run("etl", RUN_ID)
    assert excinfo.value.consumers == ["join[0]"]
    assert "join[0]" in str(excinfo.value) and "unregister" in str(excinfo.value)
    assert s3_bucket.keys() == before  # nothing deleted, no marker left
    assert store.fetch(ref, tmp_path / "in").manifest.producer.try_number == 1

    store.unregister_consumer("etl", RUN_ID, "join[0]")
    report = store.release_run("etl", RUN_ID)
    assert report.deleted_objects == 3
    with pytest.raises(PartitionNotFound):
        store.fetch(ref, tmp_path / "again")
    assert [k.rsplit("/", 2)[-2:] for k in s3_bucket.keys()] == [["_run", "released.json"]]


def test_partial_release_only_checks_leases_that_cover_it(store, tmp_path):
    #   orders[0] --> join[0] (registered);   orders[1] (no consumer left)
    commit(store, tmp_path, index=0)
    other = commit(store, tmp_path, index=1)
    store.register_consumer("etl", RUN_ID, "join[0]", partitions=["orders[0]"])
    with pytest.raises(ReleaseRefused):
        store.release_run("etl", RUN_ID, partitions=["orders[0]", "orders[1]"])
    store.release_run("etl", RUN_ID, partitions=["orders[1]"])
    report = store.check_availability("etl", RUN_ID, ["orders[0]", "orders[1]"])
    assert report.available == {"orders[0]"} and report.unavailable_ids == {"orders[1]"}
    with pytest.raises(PartitionNotFound):
        store.manifest(other)


def test_expired_leases_do_not_block(store, tmp_path, clock):
    commit(store, tmp_path)
    store.register_consumer("etl", RUN_ID, "crashed-consumer", ttl=60)
    with pytest.raises(ReleaseRefused):
        store.release_run("etl", RUN_ID)
    clock.advance(61)
    assert store.consumers("etl", RUN_ID) == []
    assert [lease.consumer for lease in store.consumers("etl", RUN_ID, include_expired=True)] == [
        "crashed-consumer"
    ]
    store.release_run("etl", RUN_ID)


def test_registration_is_refused_once_release_started(store, tmp_path, s3_bucket):
    commit(store, tmp_path)
    # A release in progress (its marker is written before it re-checks leases and deletes):
    store.json_objects.create(
        store.layout.marker_key(RunRef("etl", RUN_ID), "releasing"), {"partitions": None, "at": 0}
    )
    with pytest.raises(ConsumerRegistrationRefused, match="are being released"):
        store.register_consumer("etl", RUN_ID, "late-consumer")
    assert not [k for k in s3_bucket.keys() if "/leases/" in k]  # its lease was withdrawn


def test_registration_after_release_is_refused(store, tmp_path):
    commit(store, tmp_path)
    store.release_run("etl", RUN_ID)
    with pytest.raises(ConsumerRegistrationRefused, match="were released"):
        store.register_consumer("etl", RUN_ID, "late-consumer")


def test_retention_releases_only_ended_runs_whose_time_is_up(make_store, tmp_path, clock):
    #   old (succeeded 8 d ago) -> released      recent (succeeded 1 h ago) -> kept
    #   running (not succeeded) -> kept          leased (succeeded 8 d ago, consumer left) -> kept
    store = make_store(retention=7 * 86400)
    runs = {
        name: f"scheduled__2026-11-{i + 10}T00:00:00+00:00"
        for i, name in enumerate(["old", "recent", "running", "leased"])
    }
    for run_id in runs.values():
        commit(store, tmp_path, run_id=run_id)
    now = clock.now()
    for name in ("old", "leased"):
        store.mark_run_ended("etl", runs[name], at=now - 8 * 86400, succeeded=True)
    store.mark_run_ended("etl", runs["recent"], at=now - 3600, succeeded=True)
    store.register_consumer("etl", runs["leased"], "backfill")

    outcomes = {o.run.run_id: o for o in store.release_expired_runs("etl")}
    assert {name: outcomes[run_id].released for name, run_id in runs.items()} == {
        "old": True,
        "recent": False,
        "running": False,
        "leased": False,
    }
    assert "retention not over" in outcomes[runs["recent"]].reason
    assert "has not ended" in outcomes[runs["running"]].reason
    assert "backfill" in outcomes[runs["leased"]].reason
    assert store.check_availability("etl", runs["old"], ["orders[0]"]).unavailable_ids == {"orders[0]"}
    assert store.check_availability("etl", runs["recent"], ["orders[0]"]).available == {"orders[0]"}
    assert store.release_expired_runs("etl")[0].reason == "already released"


def test_orphan_cleanup_respects_the_grace_period_and_the_current_attempt(store, tmp_path, s3_bucket, clock):
    ref = commit(store, tmp_path, try_number=1)
    old_attempt = store.manifest(ref).attempt_id
    commit(store, tmp_path, try_number=2)  # supersedes try 1; readers may still be on it
    current = store.manifest(ref).attempt_id
    client = s3_bucket.client()
    prefix = store.layout.partition_prefix(ref)
    client.put_object(Bucket=s3_bucket.name, Key=prefix + "attempts/t3-crashed/part-0.bin", Body=b"x")
    upload = client.create_multipart_upload(Bucket=s3_bucket.name, Key=prefix + "attempts/t3-crashed/big.bin")

    young = store.cleanup_orphans("etl", RUN_ID)
    assert young.deleted_keys == () and young.aborted_uploads == ()
    assert {k.split("/")[-2] for k in young.kept_in_flight} == {old_attempt, "t3-crashed"}

    clock.advance(store.orphan_grace + 120)
    report = store.cleanup_orphans("etl", RUN_ID)
    assert {k.split("/attempts/")[1].split("/")[0] for k in report.deleted_keys} == {
        old_attempt,
        "t3-crashed",
    }
    assert report.aborted_uploads == (prefix + "attempts/t3-crashed/big.bin",)
    assert {k.split("/attempts/")[1].split("/")[0] for k in s3_bucket.keys() if "/attempts/" in k} == {
        current
    }
    assert client.list_multipart_uploads(Bucket=s3_bucket.name).get("Uploads", []) == []
    assert upload["UploadId"]
    assert store.check_availability("etl", RUN_ID, ["orders[0]"]).available == {"orders[0]"}
