"""A run's recovery follows the pipeline stored with the run: stored once by its first try, replaced by
a changed DAG only while no restart is pending (RecoveryJournal.settle_description), against a real S3
endpoint."""

from __future__ import annotations

import logging

import pytest

from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output
from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.recovery.run_recovery import RunRecovery

pytestmark = pytest.mark.s3

RUN = "manual__1"


def pipeline(*extra: StageDeclaration) -> PipelineDescription:
    return PipelineDescription(
        "locator",
        [StageDeclaration("A", 1, (), (Output("a"),)), StageDeclaration("B", 1, (Input("a"),), ()), *extra],
    )


@pytest.fixture
def store(s3_bucket):
    return S3PartitionStore(s3_bucket.client(), s3_bucket.url)


def settle_run_pipeline(parsed, store, run_id, *, now):
    return RecoveryJournal(store, RunRef(parsed.dag_id, run_id)).settle_description(parsed, now=now)


def stored(store):
    return RunRecovery.for_reader(store, "locator", RUN).pipeline


def test_the_first_try_stores_the_pipeline_and_the_same_one_writes_nothing(store, s3_bucket, caplog):
    first = pipeline()
    assert settle_run_pipeline(first, store, RUN, now=1000.0) is first
    assert stored(store).to_json() == first.to_json()
    key = RecoveryJournal(store, RunRef("locator", RUN)).description_key
    etag = s3_bucket.client().head_object(Bucket=s3_bucket.name, Key=key)["ETag"]
    caplog.set_level(logging.WARNING)
    again = pipeline()  # parsed again by the next try: equal, another object
    assert settle_run_pipeline(again, store, RUN, now=1001.0) is again
    assert s3_bucket.client().head_object(Bucket=s3_bucket.name, Key=key)["ETag"] == etag  # no write
    assert "changed since run" not in caplog.text


def test_a_changed_dag_replaces_the_pipeline_only_while_no_restart_is_pending(store, caplog):
    settle_run_pipeline(pipeline(), store, RUN, now=1000.0)
    journal = RecoveryJournal(store, RunRef("locator", RUN))
    journal.update(lambda state: state.not_before.update(B=1100.0))  # a restart of B at 1100
    changed = pipeline(StageDeclaration("C", 1, (Input("a"),), ()))
    caplog.set_level(logging.WARNING)
    kept = settle_run_pipeline(changed, store, RUN, now=1050.0)
    assert sorted(kept.stages) == ["A", "B"] and sorted(stored(store).stages) == ["A", "B"]
    assert "DAG locator changed since run manual__1 stored its pipeline" in caplog.text
    assert settle_run_pipeline(changed, store, RUN, now=1200.0) is changed  # the restart is done
    assert sorted(stored(store).stages) == ["A", "B", "C"]


def mapped_at_run_time() -> PipelineDescription:
    return pipeline(StageDeclaration("C", 1, (Input("a"),), (), mapped=True, expands_at_run_time=True))


def test_a_run_time_count_is_recorded_once_kept_by_later_tries_and_in_the_history(store, caplog):
    from airflow_ft_provider.model.map_counts import RunTimeCount
    from airflow_ft_provider.recovery.journal_events import StageExpanded

    parsed = mapped_at_run_time()
    journal = RecoveryJournal(store, RunRef("locator", RUN))
    context = {"run_id": RUN}
    for try_number in (1, 1, 2):  # two indexes' first tries, then a retry: one record
        recovery = RunRecovery.for_worker(
            context, parsed=parsed, store=store, settle=True, expanded=RunTimeCount("C", 37, try_number)
        )
        assert recovery.pipeline.graph.stages["C"].parallelism == 37
    # A later try parses the DAG again (no counts): the stored counts stand, for every reader, and
    # nothing says the DAG changed
    caplog.set_level(logging.WARNING)
    assert settle_run_pipeline(mapped_at_run_time(), store, RUN, now=2000.0).map_counts == {"C": 37}
    assert "changed since run" not in caplog.text
    assert stored(store).core_task_id("C", 23) == "C[23]"
    [event] = [e for e in journal.events() if isinstance(e, StageExpanded)]
    assert (event.task, event.count, event.previous) == ("C", 37, None)
    assert "37 map indexes" in event.reason
    # The output it expands over changed (the run was cleared and its upstream returned fewer items)
    RunRecovery.for_worker(
        context, parsed=parsed, store=store, settle=True, expanded=RunTimeCount("C", 30, 3)
    )
    assert stored(store).map_counts == {"C": 30}
    changed = [e for e in journal.events() if isinstance(e, StageExpanded)][-1]
    assert (changed.count, changed.previous) == (30, 37) and "37 before" in changed.reason


def test_a_changed_dag_replacing_the_stored_pipeline_keeps_the_runs_counts(store):
    from airflow_ft_provider.model.map_counts import RunTimeCount

    RunRecovery.for_worker(
        {"run_id": RUN},
        parsed=mapped_at_run_time(),
        store=store,
        settle=True,
        expanded=RunTimeCount("C", 4, 1),
    )
    edited = pipeline(
        StageDeclaration("C", 1, (Input("a"),), (Output("c"),), mapped=True, expands_at_run_time=True)
    )
    assert settle_run_pipeline(edited, store, RUN, now=3000.0).map_counts == {"C": 4}
    assert stored(store).stages["C"].outputs == (Output("c"),) and stored(store).map_counts == {"C": 4}


def test_the_runs_end_releases_the_pipelined_partitions_of_every_index_the_run_counted(store):
    from airflow_ft_provider.failover import ResultPartitionType
    from airflow_ft_provider.model.map_counts import RunTimeCount
    from airflow_ft_provider.run_end import RunEnd

    parsed = pipeline(
        StageDeclaration(
            "C",
            1,
            (Input("a"),),
            (Output("c", ResultPartitionType.PIPELINED),),
            mapped=True,
            expands_at_run_time=True,
        ),
        StageDeclaration("D", 1, (Input("c"),), ()),
    )
    assert parsed.pipelined_partitions() == []  # as parsed: C's indexes unknown
    RunRecovery.for_worker(
        {"run_id": RUN}, parsed=parsed, store=store, settle=True, expanded=RunTimeCount("C", 3, 1)
    )
    ended = RunEnd._run_description(store, RunRef("locator", RUN), parsed)
    assert ended.pipelined_partitions() == ["c[0]", "c[1]", "c[2]"]
