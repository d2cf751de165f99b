"""The life cycle that runs itself (``partitions/sweep.py``): every run end marks its run ended and
sweeps the pipeline, bounded and rate-limited; failed runs and runs marked by hand go one retention
after they ended, runs cleared again stay. Against the S3 endpoint, with the store's clock driven by
hand (S3 stamps objects with real time; retention reads only the markers' times)."""

from __future__ import annotations

import pytest

from airflow_ft_provider.partitions import PartitionRef, Producer
from airflow_ft_provider.partitions.sweep import RunStates, SweepLimits
from ft_harness.data.partition_files import version_files, write_files

pytestmark = pytest.mark.s3

HOUR = 3600.0


def commit(store, tmp_path, run_id):
    ref = PartitionRef("etl", run_id, "orders", 0)
    store.commit(ref, write_files(tmp_path / run_id, version_files(1, 2)), producer=Producer("p", 0, 1))
    return ref


def runs_with_data(store):
    """Runs whose partition is still readable (not released)."""
    return {
        run.run_id
        for run in store.runs("etl")
        if store.check_availability("etl", run.run_id, ["orders[0]"]).available
    }


def objects(s3_bucket):
    pages = s3_bucket.client().get_paginator("list_objects_v2").paginate(Bucket=s3_bucket.name)
    return sum(page.get("KeyCount", 0) for page in pages)


def test_fifty_runs_a_third_failed_keep_the_bucket_bounded_with_no_operator_action(
    make_store, tmp_path, clock, s3_bucket
):
    # One run an hour, retention 5 h, a sweep at most every hour releasing at most 2 runs. Every third
    # run fails; every tenth is marked successful by hand (no end marker: only Airflow knows it ended).
    retention, limits = 5 * HOUR, SweepLimits(every=HOUR, max_releases=2)
    store = make_store(retention=retention)
    ended_by_hand: dict[str, float] = {}

    def airflow_says():
        return RunStates(ended_at=dict(ended_by_hand))

    most_runs = most_objects = 0
    failed: list[str] = []
    for i in range(50):
        run_id = f"scheduled__{i:02d}"
        commit(store, tmp_path, run_id)
        clock.advance(HOUR)
        if i % 10 == 7:
            ended_by_hand[run_id] = clock.now()
        else:
            store.mark_run_ended("etl", run_id, succeeded=i % 3 != 2, at=clock.now())
            failed += [run_id] if i % 3 == 2 else []
        store.sweep_expired_runs("etl", states=airflow_says, limits=limits)  # what RunEnd does
        most_runs = max(most_runs, len(runs_with_data(store)))
        most_objects = max(most_objects, objects(s3_bucket))

    # A run ends each hour; it waits one retention (5 runs), plus the run whose sweep just released.
    assert most_runs <= 6, most_runs
    # 4 objects a live run (2 files, the manifest, the end marker) plus released runs' markers
    assert most_objects <= 6 * 4 + 6 + 1, most_objects
    # the last five runs, whatever their end: failed runs and runs marked by hand went like the others
    assert runs_with_data(store) == {f"scheduled__{i}" for i in range(45, 50)}
    assert len(failed) == 14 and len(ended_by_hand) == 5  # 17 and 47: marked by hand


def test_a_run_cleared_after_it_ended_stays_and_a_sweep_is_rate_limited_and_bounded(
    make_store, tmp_path, clock
):
    store = make_store(retention=HOUR)
    for run_id in ("r1", "r2", "r3", "cleared"):
        commit(store, tmp_path, run_id)
        store.mark_run_ended("etl", run_id, succeeded=False, at=clock.now())
    clock.advance(2 * HOUR)
    asked = []

    def airflow_says():
        asked.append(1)
        return RunStates(active=frozenset({"cleared"}))  # running again: its marker is stale

    limits = SweepLimits(every=HOUR, max_releases=2)
    report = store.sweep_expired_runs("etl", states=airflow_says, limits=limits)
    assert report is not None and len(report.released) == 2
    reasons = {o.run.run_id: o.reason for o in report.outcomes if not o.released}
    assert reasons["cleared"] == "running again (cleared after it ended)"
    assert "left to the next sweep" in [r for k, r in reasons.items() if k != "cleared"][0]
    # the log line says why each run stayed
    assert "kept 2 (" in report.summary() and "cleared: running again" in report.summary()
    assert report.summary(most=1).endswith("; and 1 more)")
    # swept a minute ago: no sweep, and Airflow is not asked
    clock.advance(60)
    assert store.sweep_expired_runs("etl", states=airflow_says, limits=limits) is None
    assert len(asked) == 1
    clock.advance(HOUR)
    report = store.sweep_expired_runs("etl", states=airflow_says, limits=limits)
    assert report is not None and len(report.released) == 1
    assert runs_with_data(store) == {"cleared"}


def test_the_later_end_and_the_recorded_retention_count_and_old_succeeded_markers_still_do(
    make_store, tmp_path, clock
):
    store = make_store(retention=HOUR)
    commit(store, tmp_path, "legacy")
    run = PartitionRef("etl", "legacy", "orders", 0).run
    store.objects.put_json(store.layout.marker_key(run, "succeeded"), {"at": clock.now()})  # older versions
    commit(store, tmp_path, "re-ended")
    store.mark_run_ended("etl", "re-ended", succeeded=False, at=clock.now())
    commit(store, tmp_path, "kept-longer")  # a pipeline with its own retention marked it
    make_store(retention=3 * HOUR).mark_run_ended("etl", "kept-longer", succeeded=True, at=clock.now())
    clock.advance(2 * HOUR)
    # Airflow says "re-ended" ended again a minute ago (cleared, then marked successful by hand)
    outcomes = {
        o.run.run_id: o
        for o in store.release_expired_runs("etl", states=RunStates({"re-ended": clock.now() - 60}))
    }
    assert outcomes["legacy"].released
    assert not outcomes["kept-longer"].released and "(3600 s left)" in outcomes["kept-longer"].reason
    assert not outcomes["re-ended"].released and "retention not over" in outcomes["re-ended"].reason


@pytest.mark.parametrize("bad", [{"every": -1.0}, {"every": float("nan")}, {"max_releases": 0}])
def test_sweep_limits_refuse_nonsense(bad):
    with pytest.raises(ValueError, match="sweep"):
        SweepLimits(**bad)
