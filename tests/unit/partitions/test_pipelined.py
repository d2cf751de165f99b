"""Pipelined partitions on a real S3 endpoint: the handle names the execution a consumer reads."""

from __future__ import annotations

import time

import pytest

from airflow_ft_provider.failover.clock import ManualClock
from airflow_ft_provider.partitions import (
    PartitionNotFound,
    PartitionRef,
    Producer,
    StaleCommitError,
    Unavailable,
)
from airflow_ft_provider.partitions.pipelined import PipelinedPartitions
from airflow_ft_provider.partitions.pipelined_handle import EngineLocation, execution_id
from ft_harness.data.partition_files import RUN_ID, read_all, write_files

pytestmark = pytest.mark.s3


def commit(pipelined, ref, tmp_path, try_number, content):
    source = write_files(tmp_path / f"src-{ref.partition_id}-t{try_number}", {"part-0.parquet": content})
    return pipelined.commit(
        ref, source, producer=Producer("prep", ref.map_index, try_number), compression="none"
    )


def test_each_map_index_has_its_own_handle_and_execution(store, tmp_path):
    #   prep[0] ~~p[0]~~> feat[0]
    #   prep[1] ~~p[1]~~> feat[1]        prep[1] is on try 2, prep[0] on try 1
    pipelined = PipelinedPartitions(store)
    p0, p1 = PartitionRef("etl", RUN_ID, "p", 0), PartitionRef("etl", RUN_ID, "p", 1)
    commit(pipelined, p0, tmp_path, 1, b"zero")
    commit(pipelined, p1, tmp_path, 2, b"one")
    handle0, handle1 = pipelined.resolve(p0), pipelined.resolve(p1)
    assert (handle0.execution, handle0.producer) == ("t1", Producer("prep", 0, 1))
    assert (handle1.execution, handle1.producer) == ("t2", Producer("prep", 1, 2))
    assert read_all(pipelined.fetch(p0, handle0, tmp_path / "in0").paths) == {"part-0.parquet": b"zero"}
    assert read_all(pipelined.fetch(p1, handle1, tmp_path / "in1").paths) == {"part-0.parquet": b"one"}


def test_an_unmapped_producer_is_resolved_the_same_way(store, tmp_path):
    pipelined = PipelinedPartitions(store)
    ref = PartitionRef("etl", RUN_ID, "t1", -1)
    commit(pipelined, ref, tmp_path, 3, b"x")
    assert pipelined.resolve(ref).execution == execution_id(3) == "t3"


def test_a_partition_no_execution_produced_is_partition_not_found(store):
    with pytest.raises(PartitionNotFound) as excinfo:
        PipelinedPartitions(store).resolve(PartitionRef("etl", RUN_ID, "p", 0))
    assert excinfo.value.partition_id == "p[0]" and excinfo.value.reason is Unavailable.MISSING_MANIFEST
    assert "no execution of its region has produced it yet" in str(excinfo.value)


def test_the_next_execution_replaces_the_handle_and_its_data_is_read(store, tmp_path):
    pipelined = PipelinedPartitions(store)
    ref = PartitionRef("etl", RUN_ID, "p", 0)
    commit(pipelined, ref, tmp_path, 1, b"first")
    commit(pipelined, ref, tmp_path, 2, b"second")
    handle = pipelined.resolve(ref)
    assert handle.execution == "t2"
    assert read_all(pipelined.fetch(ref, handle, tmp_path / "in").paths) == {"part-0.parquet": b"second"}


def test_a_zombie_try_of_an_older_execution_cannot_take_the_handle_back(store, tmp_path):
    pipelined = PipelinedPartitions(store)
    ref = PartitionRef("etl", RUN_ID, "p", 0)
    commit(pipelined, ref, tmp_path, 3, b"current")
    with pytest.raises(StaleCommitError):
        commit(pipelined, ref, tmp_path, 2, b"zombie")
    assert pipelined.resolve(ref).execution == "t3"


def test_an_execution_the_journal_saw_end_is_never_read_again(store, tmp_path):
    #   [ prep ~~p~~> feat ]   prep try 1 committed, then failover restarted the region (try 1 ended):
    #   until prep's try 2 publishes, p is unavailable, not the old execution's data
    pipelined = PipelinedPartitions(store)
    ref = PartitionRef("etl", RUN_ID, "p", 0)
    commit(pipelined, ref, tmp_path, 1, b"old")
    assert pipelined.resolve(ref, ended_through=0).execution == "t1"
    with pytest.raises(PartitionNotFound) as excinfo:
        pipelined.resolve(ref, ended_through=1)
    assert excinfo.value.reason is Unavailable.PIPELINED
    assert "written by try 1 of prep" in str(excinfo.value) and "since restarted" in str(excinfo.value)
    commit(pipelined, ref, tmp_path, 2, b"new")
    assert pipelined.resolve(ref, ended_through=1).execution == "t2"


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1]",
        b'{"version": 1}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"version": 1, "partition_id": "p[1]", "execution": "t1", "published_at": 1,'
        b' "producer": {"task_id": "prep", "map_index": 1, "try_number": 1}}',  # another partition's handle
        b'{"version": 1, "partition_id": "p[0]", "execution": "t9", "published_at": 1,'
        b' "producer": {"task_id": "prep", "map_index": 0, "try_number": 1}}',  # execution of another try
        b'{"version": 1, "partition_id": "p[0]", "execution": "../t1", "published_at": 1,'
        b' "producer": {"task_id": "../x", "map_index": 0, "try_number": 1}}',
        b'{"version": 1, "partition_id": "p[0]", "execution": "t1", "published_at": NaN,'
        b' "producer": {"task_id": "prep", "map_index": 0, "try_number": 1}}',
        b'{"version": 1, "partition_id": "p[0]", "execution": "t1", "published_at": 1, "consumed_by": [],'
        b' "engine": {"server": "sc://h:1", "view": "x; DROP TABLE t"},'
        b' "producer": {"task_id": "prep", "map_index": 0, "try_number": 1}}',  # a view name that is not one
        b'{"version": 1, "partition_id": "p[0]", "execution": "t1", "published_at": 1, "rows": -3,'
        b' "producer": {"task_id": "prep", "map_index": 0, "try_number": 1}}',  # the view's rows: a count
        b'{"version": 1, "partition_id": "p[0]", "execution": "t1", "published_at": 1, "rows": true,'
        b' "producer": {"task_id": "prep", "map_index": 0, "try_number": 1}}',
    ],
)
def test_an_invalid_handle_is_an_invalid_partition_and_the_next_commit_replaces_it(store, tmp_path, body):
    pipelined = PipelinedPartitions(store)
    ref = PartitionRef("etl", RUN_ID, "p", 0)
    store.client.put_object(Bucket=store.bucket, Key=pipelined.handle_key(ref), Body=body)
    with pytest.raises(PartitionNotFound) as excinfo:
        pipelined.resolve(ref)
    assert excinfo.value.reason is Unavailable.INVALID_MANIFEST
    commit(pipelined, ref, tmp_path, 1, b"data")
    assert pipelined.resolve(ref).execution == "t1"


def test_the_handle_is_published_only_after_the_data_is_committed(make_store, tmp_path):
    # A crash between the scratch commit and the handle leaves the previous execution current (or
    # none): a handle never names data whose manifest is not written yet.
    seen = {}
    ref = PartitionRef("etl", RUN_ID, "p", 0)

    def on_step(step, info):
        if step == "after_manifest_put":
            listed = store.client.list_objects_v2(Bucket=store.bucket, Prefix=store.layout.prefix)
            seen["keys"] = sorted(k["Key"] for k in listed.get("Contents", ()))

    store = make_store(on_step=on_step)
    pipelined = PipelinedPartitions(store)
    commit(pipelined, ref, tmp_path, 1, b"data")
    scratch = store.layout.scratch_prefix(ref, "t1")
    assert pipelined.handle_key(ref) not in seen["keys"]
    assert scratch + "manifest.json" in seen["keys"]
    assert pipelined.resolve(ref).execution == "t1"


def _scratch_keys(store, ref):
    return sorted(k for k in store.modified_times(store.layout.scratch_run_prefix(ref.run)))


def test_the_end_of_a_run_releases_every_execution_it_left_and_keeps_the_handles(store, tmp_path):
    #   p[0]: executions t1 (superseded) and t2 (current) in S3 scratch
    #   p[1]: kept by a Spark Connect server as a view
    #   p[2]: published after the run ended (a clear re-ran its region): left to that execution
    #   p[3]: scratch of try 5, never published (the try died between commit and publish)
    now = time.time()
    clock = ManualClock(now)
    pipelined = PipelinedPartitions(store, clock=clock)
    p = [PartitionRef("etl", RUN_ID, "p", i) for i in range(4)]
    commit(pipelined, p[0], tmp_path, 1, b"old")
    commit(pipelined, p[0], tmp_path, 2, b"current")
    view = EngineLocation("sc://127.0.0.1:15002", "ft_view_p1")
    pipelined.publish(p[1], Producer("prep", 1, 1), engine=view)
    store.commit(
        p[3],
        write_files(tmp_path / "orphan", {"part-0.parquet": b"x"}),
        producer=Producer("prep", 3, 5),
        compression="none",
        execution_id="t5",
    )
    ended_at = now + 5  # after every write above (S3 times have whole seconds)
    clock.advance(65)
    commit(pipelined, p[2], tmp_path, 2, b"re-run")
    handed: list = []

    released = pipelined.release_run(p[0].run, p, ended_at=ended_at, drop_views=handed.extend)

    assert [h.engine for h in handed] == [view] and released.views == (view,)
    assert released.kept == ("p[2]",)
    assert _scratch_keys(store, p[0]) == sorted(
        k for k in store.modified_times(store.layout.scratch_prefix(p[2], "t2"))
    )
    assert released.scratch_objects == 2 * 2 + 2  # p[0] t1 and t2, p[3] t5: one file + manifest each
    handle = pipelined.resolve(p[0])  # the handle stays: a zombie of try 1 is still fenced off
    assert handle.execution == "t2"
    with pytest.raises(PartitionNotFound):
        pipelined.fetch(p[0], handle, tmp_path / "in")  # a consumer cleared later backtracks
    with pytest.raises(StaleCommitError):
        commit(pipelined, p[0], tmp_path, 1, b"zombie")


def test_scratch_written_after_the_run_ended_is_not_released(store, tmp_path):
    # A try of a cleared run may commit its scratch and not have published the handle yet.
    pipelined = PipelinedPartitions(store)
    ref = PartitionRef("etl", RUN_ID, "p", 0)
    store.commit(
        ref,
        write_files(tmp_path / "young", {"part-0.parquet": b"x"}),
        producer=Producer("prep", 0, 3),
        compression="none",
        execution_id="t3",
    )
    released = pipelined.release_run(ref.run, [ref], ended_at=time.time() - 60, drop_views=pytest.fail)
    assert released.scratch_objects == 0 and len(_scratch_keys(store, ref)) == 2


def test_scratch_outside_the_pipelines_partitions_is_not_touched(store, tmp_path):
    pipelined = PipelinedPartitions(store)
    ours, other = PartitionRef("etl", RUN_ID, "p", 0), PartitionRef("etl", RUN_ID, "q", 0)
    commit(pipelined, other, tmp_path, 1, b"not declared by this pipeline")
    released = pipelined.release_run(ours.run, [ours], ended_at=time.time() + 5, drop_views=pytest.fail)
    assert released.scratch_objects == 0 and len(_scratch_keys(store, other)) == 2
