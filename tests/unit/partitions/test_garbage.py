"""``airflow-ft gc``: what a scheduled sweep of the bucket releases, and everything it must keep."""

from __future__ import annotations

import json
import time

import pytest

from airflow_ft_provider.cli import main
from airflow_ft_provider.partitions import (
    ConsumerRegistrationRefused,
    PartitionNotFound,
    PartitionRef,
    Producer,
)
from airflow_ft_provider.partitions.garbage import collect
from ft_harness.data.partition_files import version_files, write_files

pytestmark = [pytest.mark.s3, pytest.mark.usefixtures("cli_logging")]

DAY = 86400


def commit(store, tmp_path, pipeline, run_id, try_number=1):
    ref = PartitionRef(pipeline, run_id, "orders", 0)
    source = write_files(
        tmp_path / f"src-{pipeline}-{run_id[-2:]}-{try_number}", version_files(try_number, 2)
    )
    store.commit(ref, source, producer=Producer("p", 0, try_number))
    return ref


def test_a_sweep_releases_expired_runs_and_orphans_and_keeps_what_is_still_needed(
    make_store, tmp_path, clock, s3_bucket
):
    #   etl/old       succeeded 8 d ago                -> released
    #   etl/recent    succeeded 1 h ago                -> kept whole
    #   etl/leased    succeeded 8 d ago, leased        -> kept whole
    #   etl/running   in flight: a superseded attempt and a crashed one, both old -> removed;
    #                 its current partition stays, and so does a commit still in flight
    #   report/old    another pipeline, succeeded 8 d ago -> released
    store = make_store(retention=7 * DAY, orphan_grace=60)
    runs = {
        name: f"scheduled__2026-11-1{i}T00:00:00+00:00"
        for i, name in enumerate(["old", "recent", "leased", "running"])
    }
    refs = {name: commit(store, tmp_path, "etl", run_id) for name, run_id in runs.items()}
    report_old = commit(store, tmp_path, "report", runs["old"])
    superseded = store.manifest(refs["running"]).attempt_id
    commit(store, tmp_path, "etl", runs["running"], try_number=2)
    current = store.manifest(refs["running"]).attempt_id
    prefix = store.layout.partition_prefix(refs["running"])
    client = s3_bucket.client()
    client.put_object(Bucket=s3_bucket.name, Key=prefix + "attempts/t3-crashed/part-0.bin", Body=b"x")
    now = clock.now()
    for name in ("old", "leased"):
        store.mark_run_ended("etl", runs[name], at=now - 8 * DAY, succeeded=True)
    store.mark_run_ended("etl", runs["recent"], at=now - 3600, succeeded=True)
    store.mark_run_ended("report", runs["old"], at=now - 8 * DAY, succeeded=True)
    store.register_consumer("etl", runs["leased"], "backfill", ttl=30 * DAY)
    orphans_written = time.time()
    time.sleep(4)  # S3 times have whole seconds: the in-flight commit below is >= 3 s younger
    client.put_object(Bucket=s3_bucket.name, Key=prefix + "attempts/t4-in-flight/part-0.bin", Body=b"y")
    clock.advance(orphans_written + 2 + store.orphan_grace - clock.now())  # orphans past the grace, t4 not
    clock_now = clock.now()

    report = collect(store)

    assert sorted(str(run) for run in report.released) == sorted(
        [f"etl/{runs['old']}", f"report/{runs['old']}"]
    )
    kept = {o.run.run_id: o.reason for o in report.kept}
    assert set(kept) == {runs["recent"], runs["leased"]}
    assert "retention not over" in kept[runs["recent"]] and "backfill" in kept[runs["leased"]]
    for ref in (refs["old"], report_old):
        with pytest.raises(PartitionNotFound):
            store.manifest(ref)
    for name in ("recent", "leased", "running"):
        assert store.check_availability("etl", runs[name], ["orders[0]"], deep=True).available == {
            "orders[0]"
        }
    attempts = {
        k.split("/attempts/")[1].split("/")[0] for k in s3_bucket.keys() if prefix in k and "/attempts/" in k
    }
    # t4-in-flight was written after the clock's "now" minus the grace: an in-flight commit's data
    assert attempts == {current, "t4-in-flight"} and superseded not in attempts
    assert report.orphans_deleted == 2 + 1  # the superseded attempt's two files and the crashed one
    assert clock.now() == clock_now  # the sweep never moves time (nothing released early)
    assert collect(store).released == []  # idempotent


def test_the_gc_command_sweeps_the_configured_store_and_names_what_it_kept(
    monkeypatch, make_store, tmp_path, clock, s3_bucket, capsys
):
    store = make_store()
    run_id = "manual__2026-11-20T00:00:00+00:00"
    commit(store, tmp_path, "etl", run_id)
    store.mark_run_ended("etl", run_id, at=clock.now() - 60, succeeded=True)
    endpoint = s3_bucket.endpoint
    monkeypatch.setenv(
        "AIRFLOW_CONN_FT_GC",
        json.dumps(
            {
                "conn_type": "aws",
                "login": endpoint.access_key,
                "password": endpoint.secret_key,
                "extra": {"endpoint_url": endpoint.url, "region_name": endpoint.region},
            }
        ),
    )
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_RETENTION", "1 d")

    assert main(["gc", "--store", store.layout.url, "--aws-conn-id", "ft_gc"]) == 0
    out = capsys.readouterr().out
    assert f"kept etl/{run_id}: retention not over" in out
    assert "0 runs released, 0 orphaned objects deleted" in out
    assert endpoint.secret_key not in out

    with pytest.raises(SystemExit) as stopped:
        main(["gc", "--store", store.layout.url, "--aws-conn-id", "ft_gc", "--pipeline", "../etc"])
    assert stopped.value.code == 1 and "airflow-ft gc: error:" in capsys.readouterr().err


def test_a_release_marker_goes_one_retention_after_the_release_and_the_run_leaves_the_listing(
    make_store, tmp_path, clock, s3_bucket
):
    #   day 0   run succeeds        day 7   sweep releases it (marker refuses late consumers)
    #   day 13  sweep keeps marker  day 14  sweep removes marker: nothing of the run is listed any more
    store = make_store(retention=7 * DAY)
    run_id = "scheduled__2026-11-01T00:00:00+00:00"
    commit(store, tmp_path, "etl", run_id)
    store.mark_run_ended("etl", run_id, at=clock.now(), succeeded=True)
    run = store.runs("etl")[0]
    marker = store.layout.marker_key(run, "released")

    clock.advance(7 * DAY)
    assert [str(released) for released in collect(store).released] == [f"etl/{run_id}"]
    assert [k for k in s3_bucket.keys() if k.startswith(store.layout.run_prefix(run))] == [marker]

    clock.advance(6 * DAY)
    report = collect(store)
    assert (report.released, report.kept, report.markers_expired) == ([], [], 0)
    assert marker in s3_bucket.keys()
    with pytest.raises(ConsumerRegistrationRefused, match="were released"):
        store.register_consumer("etl", run_id, "late-backfill")  # the marker is still doing its job

    clock.advance(1 * DAY)
    report = collect(store)
    assert (report.released, report.kept, report.markers_expired) == ([], [], 1)
    assert (
        "0 runs released, 0 orphaned objects deleted, 0 stale uploads aborted, 1 release markers expired"
        in (report.lines())
    )
    assert store.runs("etl") == [] and marker not in s3_bucket.keys()
    assert collect(store).markers_expired == 0  # idempotent
