"""Stateful checkpointed stages on a real Spark Connect server (and the aggregation on spark-submit too):
an aggregation whose state lives in Spark's RocksDB state store (changelog checkpointing: Spark's
incremental checkpoints) resumes from a checkpoint with its state and ends with the failure-free
result; dropDuplicates keeps each key once across a resume; what Spark cannot run incrementally is
refused with what to do instead.

    numbers (blocking, 8 files) --> totals / keys (checkpointed: about one file per micro-batch)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.spark.stage_io import StageIOError
from tests.apps import checkpointed as apps
from tests.unit.stage_try.test_checkpointed import RUN_ID, run

pytestmark = [pytest.mark.s3, pytest.mark.spark]
BATCH_3 = [{"task": "stage", "mode": "batch", "batch": 3}]


def rows(dag, result):
    store = dag.task_dict["stage"].store
    return sorted(
        tuple(r.values()) for r in read_table(store, RunRef(dag.dag_id, RUN_ID).parse(result)).to_pylist()
    )


TOTALS_APP = str(Path(__file__).resolve().parents[2] / "apps" / "checkpointed_totals.py")


@pytest.mark.parametrize("backend", ["spark-connect", "spark-submit"])
def test_an_aggregation_resumes_with_its_rocksdb_state_from_a_changelog_checkpoint(make_dag, backend):
    dag = make_dag("ft_state_totals", apps.totals if backend == "spark-connect" else TOTALS_APP, "totals")
    run(dag, "numbers", 1)
    with pytest.raises(Exception, match="injected failure inside micro-batch 3"):
        run(dag, "stage", 1, BATCH_3)
    store = dag.task_dict["stage"].store
    from airflow_ft_provider.checkpoints.store_copy import StoreCheckpoints

    [latest, *_] = StoreCheckpoints(store, RunRef(dag.dag_id, RUN_ID), "stage").candidates()
    state = [f.path for f in latest.files if f.path.startswith("spark/state/")]
    assert any(p.endswith(".changelog") for p in state), state  # RocksDB, changelog checkpointing
    assert [f.path for f in latest.files if f.path.startswith("out/")] == [
        f.path for f in latest.files if f.path.startswith(f"out/totals/b{latest.checkpoint_id:010d}/")
    ]  # complete mode: the newest batch is the whole result
    pushed = run(dag, "stage", 2)
    assert pushed["totals"]["checkpoint"]["why"] == "resume"
    store = dag.task_dict["stage"].store
    table = read_table(store, RunRef(dag.dag_id, RUN_ID).parse("totals")).to_pylist()
    # by name: the column order of agg({...}) differs between Spark Connect and classic PySpark
    assert sorted((r["k"], r["total"], r["count(1)"]) for r in table) == apps.expected_totals()


def test_drop_duplicates_keeps_each_key_once_across_a_resume(make_dag):
    dag = make_dag("ft_state_keys", apps.distinct_keys, "keys")
    run(dag, "numbers", 1)
    with pytest.raises(Exception, match="injected failure inside micro-batch 3"):
        run(dag, "stage", 1, BATCH_3)
    pushed = run(dag, "stage", 2)
    assert pushed["keys"]["checkpoint"]["why"] == "resume"
    assert rows(dag, "keys") == [(k,) for k in range(13)]


@pytest.mark.parametrize(
    ("app", "message"),
    [
        (apps.aggregate_appended, "an aggregation needs write_stream(..., output_mode='complete')"),
        (apps.two_streams, "a checkpointed stage reads one input incrementally"),
    ],
    ids=["aggregation-appended", "stream-stream-join"],
)
def test_what_spark_cannot_run_incrementally_is_refused_with_the_fix(make_dag, app, message):
    dag = make_dag(f"ft_state_{app.__name__}", app, "totals")
    run(dag, "numbers", 1)
    with pytest.raises(StageIOError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run(dag, "stage", 1, expect="fail")  # a code bug: not recoverable, no restart


def test_under_a_slow_operator_micro_batches_shrink_and_checkpoints_stay_near_the_interval(make_dag):
    # interval-volume alone would admit the whole input (8 files, ~5 s of work) in one micro-batch.
    keys = {"execution.checkpointing.interval": "2 s", "execution.checkpointing.interval-volume": "1 mb"}
    dag = make_dag("ft_state_slow", apps.slow_squares, "squares", **keys)
    run(dag, "numbers", 1)
    pushed = run(dag, "stage", 1)
    between = pushed["squares"]["checkpoint"]["seconds_between_checkpoints"]
    assert len(between) >= 3, between  # at least four micro-batches
    assert max(between) <= 2 * 2.0, between  # seed 004's aim: bounded by about the interval
    assert rows(dag, "squares") == [(i, i * i) for i in range(apps.ROWS)]
