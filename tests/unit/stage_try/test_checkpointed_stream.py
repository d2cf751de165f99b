"""Checkpointed stages on the executors' data path (spark/object_stream.py, stage_try/checkpointed_stream.py),
on a real Spark Connect server and an S3 endpoint: nothing goes through the worker's disk, a retry
resumes from Spark's checkpoint and the committed output holds every row exactly once.

    numbers (blocking, 8 files) --> stage (checkpointed, data_path="executors": about one file per
                                            micro-batch)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_ft_provider.checkpoints.store_copy import StoreCheckpoints
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.data.journal_records import stored_events
from tests.apps import checkpointed as apps
from tests.unit.stage_try.test_checkpointed import RUN_ID, run

pytestmark = [pytest.mark.s3, pytest.mark.spark]
BATCH_3 = [{"task": "stage", "mode": "batch", "batch": 3}]


def rows(dag, result):
    store = dag.task_dict["stage"].store
    table = read_table(store, RunRef(dag.dag_id, RUN_ID).parse(result)).to_pylist()
    return sorted(tuple(r.values()) for r in table)


def streams(dag):
    checkpoints = StoreCheckpoints(dag.task_dict["stage"].store, RunRef(dag.dag_id, RUN_ID), "stage")
    return sorted(checkpoints.store.list_objects(checkpoints.prefix + "streams/"))


SQUARES_APP = str(Path(__file__).resolve().parents[2] / "apps" / "checkpointed_squares.py")


@pytest.mark.parametrize("backend", ["spark-connect", "spark-submit"])
def test_a_retry_resumes_from_spark_s_checkpoint_and_every_row_is_committed_once(make_dag, backend, tmp_path):
    app = apps.squares if backend == "spark-connect" else SQUARES_APP
    dag = make_dag("ft_stream_squares", app, "squares", data_path="executors")
    run(dag, "numbers", 1)
    with pytest.raises(Exception, match="injected failure inside micro-batch 3"):
        run(dag, "stage", 1, BATCH_3)
    written = streams(dag)
    assert any("/b000003/" in key for key in written), written  # batch 3 wrote, Spark did not commit it
    pushed = run(dag, "stage", 2)
    summary = pushed["squares"]["checkpoint"]
    # 0-2 committed (3 has markers, so 2 was committed; 3 itself failed after its tasks wrote)
    assert (summary["why"], summary["restored_from"]) == ("resume", 2), summary
    assert 0 < summary["input_bytes_read"] < summary["input_bytes"], summary
    assert summary["checkpoints"]["completed"] >= 1 and summary["checkpoints"]["last_size"] > 0, summary
    # Each try's statistics in the run's history: try 1 recorded 0-3 and failed in 3, so 0-2 count
    journal = RecoveryJournal(dag.task_dict["stage"].store, RunRef(dag.dag_id, RUN_ID))
    taken = [e for e in stored_events(journal) if e["kind"] == "checkpoints"]
    assert [(e["try_number"], e["succeeded"], e["completed"]) for e in taken][:1] == [(1, False, 3)], taken
    assert [(e["try_number"], e["succeeded"]) for e in taken[1:]] == [(2, True)], taken
    assert taken[1]["reason"].startswith("stage try 2 succeeded: "), taken
    assert rows(dag, "squares") == [(i, i * i) for i in range(apps.ROWS)]
    assert streams(dag) == []  # the committed try removed the micro-batches' outputs
    assert not (tmp_path / "checkpoints").exists()  # nothing of the stage on the worker's disk
    assert any((tmp_path / "spark-side").rglob("commits/*"))  # Spark's checkpoint, where Spark keeps it


def test_an_aggregation_s_state_resumes_and_its_last_micro_batch_is_the_result(make_dag):
    dag = make_dag("ft_stream_totals", apps.totals, "totals", data_path="executors")
    run(dag, "numbers", 1)
    with pytest.raises(Exception, match="injected failure inside micro-batch 3"):
        run(dag, "stage", 1, BATCH_3)
    pushed = run(dag, "stage", 2)
    assert pushed["totals"]["checkpoint"]["why"] == "resume"
    store = dag.task_dict["stage"].store
    table = read_table(store, RunRef(dag.dag_id, RUN_ID).parse("totals")).to_pylist()
    assert sorted((r["k"], r["total"], r["count(1)"]) for r in table) == apps.expected_totals()


def test_an_input_rebuilt_since_starts_a_new_generation_afresh(make_dag):
    dag = make_dag("ft_stream_rebuilt", apps.squares, "squares", data_path="executors")
    run(dag, "numbers", 1)
    with pytest.raises(Exception, match="injected failure inside micro-batch 3"):
        run(dag, "stage", 1, BATCH_3)
    before = {key.split("/streams/")[1].split("/")[0] for key in streams(dag)}
    # Failover restarts the producer's region: its clear records the try it ends, and numbers' try 2
    # commits a new attempt of numbers.
    journal = RecoveryJournal(dag.task_dict["numbers"].store, RunRef(dag.dag_id, RUN_ID))
    journal.update(lambda state: state.mark_superseded("numbers", 1))
    run(dag, "numbers", 2)
    pushed = run(dag, "stage", 2)
    assert pushed["squares"]["checkpoint"]["why"] == "no-checkpoint"
    assert pushed["squares"]["checkpoint"]["generation"] not in before
    assert rows(dag, "squares") == [(i, i * i) for i in range(apps.ROWS)]


def test_micro_batches_without_rows_commit_an_empty_output_that_keeps_the_schema(make_dag):
    dag = make_dag("ft_stream_none", apps.no_squares, "squares", data_path="executors")
    run(dag, "numbers", 1)
    pushed = run(dag, "stage", 1)
    assert pushed["squares"]["rows"] == 0
    # each micro-batch is a checkpoint all the same (partition 0's marker): 8 files, about 1 a batch
    assert pushed["squares"]["checkpoint"]["checkpoints"]["completed"] >= 7, pushed["squares"]
    table = read_table(dag.task_dict["stage"].store, RunRef(dag.dag_id, RUN_ID).parse("squares"))
    assert (table.num_rows, table.column_names) == (0, ["id", "sq"])  # one empty object, for readers
