"""A checkpointed stage on the staged data path (``data_path="staged"``: the stream's input, Spark's
checkpoint and its task-local copy on the worker's disk; the executors' path is
``test_checkpointed_stream.py``), on a real Spark Connect server over the S3 endpoint: a try that
fails inside a micro-batch leaves its checkpoint, the next try resumes after the last completed
micro-batch and reads only the rest of its input, and the output is committed once, equal to a
failure-free run's.

    numbers --numbers (blocking, 8 files)--> squares (checkpointed: about one file per micro-batch)

``squares`` runs on the Spark Connect server (a callable) and under spark-submit (a PySpark file).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest
from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.partitions import PartitionNotFound, RunRef
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.pipeline import FailoverPipeline
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.spark.sink_log import committed_names
from ft_harness.data.journal_records import stored_events
from ft_harness.services.s3_server import REPO_ROOT
from tests.apps import checkpointed as apps

pytestmark = [pytest.mark.s3, pytest.mark.spark]
RUN_ID = "manual__2026-11-25T07:00:00+00:00"


class TaskInstance(types.SimpleNamespace):
    def xcom_push(self, key, value):
        self.pushed[key] = value

    def xcom_pull(self, **kwargs):
        return None


SQUARES_APP = str(Path(__file__).resolve().parents[2] / "apps" / "checkpointed_squares.py")


@pytest.fixture(params=["spark-connect", "spark-submit"])
def pipeline(request, make_pipeline):
    return make_pipeline(request.param)


@pytest.fixture
def make_pipeline(s3_bucket, spark_connect, monkeypatch, tmp_path):
    """make(backend, **checkpoint keys) -> (dag, task-local checkpoint root, failure message)."""
    return lambda backend, **keys: build(backend, keys, s3_bucket, spark_connect, monkeypatch, tmp_path)


def checkpointed_dag(store_url, squares, keys):
    """numbers -> squares (checkpointed); the connections come from the environment."""
    with DAG("ft_checkpointed", schedule=None) as dag:
        with FailoverPipeline(
            store=store_url,
            spark_conn_id="ft_checkpoint_connect",
            data_path="staged",
            restart_strategy={
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": 5,
                "restart-strategy.fixed-delay.delay": "0 s",
            },
        ):
            SparkStageOperator(task_id="numbers", python_callable=apps.numbers, outputs=["numbers"])
            SparkStageOperator(
                task_id="squares",
                **squares,
                inputs=["numbers"],
                outputs=["squares"],
                # a file per batch
                checkpointing={"execution.checkpointing.interval-volume": "1 kb", **keys},
            )
    return dag


def build(backend, keys, s3_bucket, spark_connect, monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", s3_bucket.endpoint.aws_connection())
    monkeypatch.setenv("AIRFLOW_CONN_FT_CHECKPOINT_CONNECT", json.dumps(spark_connect.connection()))
    monkeypatch.setenv(
        "AIRFLOW_CONN_FT_CHECKPOINT_SUBMIT", json.dumps({"conn_type": "spark", "host": "local[1]"})
    )
    squares = (
        {"python_callable": apps.squares}
        if backend == "spark-connect"
        else {"application": SQUARES_APP, "spark_conn_id": "ft_checkpoint_submit"}
    )
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION", "True")
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__CHECKPOINT_LOCAL_DIR", str(tmp_path / "checkpoints"))
    dag = checkpointed_dag(s3_bucket.url, squares, keys)
    # spark-submit reports the application's failure as its exit status (the reason is in its log)
    failed = "injected failure inside micro-batch {}"  # spark-submit: the driver's failure report says it
    return dag, tmp_path / "checkpoints", failed


def run(dag, task_id, try_number, faults=(), *, expect="retry"):
    """One try, as the task runner makes it: execute, and on a failure the stage's retry policy (whose
    decision must be ``expect``: a code bug's is "fail")."""
    operator = dag.task_dict[task_id]
    ti = TaskInstance(map_index=-1, try_number=try_number, pushed={}, task_id=task_id, dag_id=dag.dag_id)
    conf = {"ft_faults": list(faults)}
    context = {
        "ti": ti,
        "dag": dag,
        "run_id": RUN_ID,
        "dag_run": types.SimpleNamespace(conf=conf),
        "params": {},
    }
    try:
        operator.execute(context)
    except Exception as failure:
        decision = operator.retry_policy.evaluate(failure, try_number, 100, context)
        assert decision.action.value == expect, decision.reason
        raise
    finally:
        operator.__dict__.pop("store", None)  # a fresh client per try, as in a new worker process
    return ti.pushed.get("ft_partitions")


def history(dag):
    return stored_events(RecoveryJournal(dag.task_dict["squares"].store, RunRef("ft_checkpointed", RUN_ID)))


def restores(dag):
    """(try, checkpoint restored from, sentence) of every try of squares, from the run's history."""
    return [
        (e["try_number"], e["restored_from"], e["reason"]) for e in history(dag) if e["kind"] == "checkpoint"
    ]


def output(dag):
    table = read_table(dag.task_dict["squares"].store, RunRef("ft_checkpointed", RUN_ID).parse("squares"))
    return sorted((r["id"], r["sq"]) for r in table.to_pylist())


EXPECTED = [(i, i * i) for i in range(apps.ROWS)]


def test_a_retry_resumes_after_the_last_completed_micro_batch_and_reads_only_the_rest(pipeline):
    dag, _, failed = pipeline
    run(dag, "numbers", 1)
    with pytest.raises(Exception, match=failed.format(3)):
        run(dag, "squares", 1, [{"task": "squares", "mode": "batch", "batch": 3}])
    faults = [{"task": "squares", "mode": "batch", "batch": 3}]  # times: 1, so not on try 2
    # Input already processed is not read again, nor fetched: the retry would fail on these objects.
    store = dag.task_dict["squares"].store
    numbers = store.manifest(RunRef("ft_checkpointed", RUN_ID).parse("numbers"))
    prefix = store.layout.partition_prefix(RunRef("ft_checkpointed", RUN_ID).parse("numbers"))
    store.delete_keys([prefix + entry.key for entry in numbers.files[1:3]])  # read by batches 1-2
    pushed = run(dag, "squares", 2, faults)
    # The history (the failover page, airflow-ft history) holds each try's restore point: try 2 resumed
    # at checkpoint 2, after batches 0-2, as the task log says.
    tried = restores(dag)
    assert [(t, k) for t, k, _ in tried[:2]] == [(1, None), (2, 2)]
    assert tried[1][2].startswith("squares try 2 resumed at checkpoint 2: ")
    summary = pushed["squares"]["checkpoint"]
    assert summary["why"] == "resume" and summary["restored_from"] >= 2
    assert summary["explanation"].startswith("squares try 2 resumed at checkpoint ")
    # Batches 0-2 (three of the eight files) are not read again: only the rest of the input is.
    assert 0 < summary["input_bytes_read"] < summary["input_bytes"]
    assert summary["input_bytes_read"] == pytest.approx(summary["input_bytes"] * 5 / 8, rel=0.15)
    assert output(dag) == EXPECTED  # every row once: no duplicate from batch 3's partial output
    assert pushed["squares"]["rows"] == apps.ROWS
    # Seed 003's monitoring: each try's checkpoint statistics are in the history (and the task log).
    stats = [e for e in history(dag) if e["kind"] == "checkpoints"]
    assert [(e["try_number"], e["succeeded"]) for e in stats] == [(1, False), (2, True)]
    assert stats[0]["completed"] >= 1 and stats[0]["last_completed"] == 2 and stats[0]["failed"] == 0
    assert 0 < stats[0]["processed_bytes"] < stats[0]["total_bytes"] and stats[0]["last_size"] > 0
    assert stats[-1]["last_completed"] >= 6 and stats[-1]["processed_bytes"] == stats[-1]["total_bytes"]


# The fencing is the try's, not the backend's: one backend is enough (spark-submit costs a JVM per try).
@pytest.mark.parametrize("pipeline", ["spark-connect"], indirect=True)
def test_a_checkpoint_taken_against_an_input_failover_rebuilt_is_not_reused(pipeline):
    dag, checkpoints, failed = pipeline
    run(dag, "numbers", 1)
    with pytest.raises(Exception, match=failed.format(2)):
        run(dag, "squares", 1, [{"task": "squares", "mode": "batch", "batch": 2}])
    # Failover restarts the producer's region (a lost partition, a manual restart): its clear records the
    # try it ends, and numbers' try 2 commits a new attempt of numbers.
    journal = RecoveryJournal(dag.task_dict["numbers"].store, RunRef("ft_checkpointed", RUN_ID))
    journal.update(lambda state: state.mark_superseded("numbers", 1))
    run(dag, "numbers", 2)
    pushed = run(dag, "squares", 2)
    tried = restores(dag)
    assert [(t, k) for t, k, _ in tried[:2]] == [(1, None), (2, None)]
    assert (
        "try 2 starts fresh: checkpoint 1 was taken against other committed attempts of numbers"
        in tried[1][2]
    )
    summary = pushed["squares"]["checkpoint"]
    assert summary["why"] == "input-changed" and summary["input_bytes_read"] == summary["input_bytes"]
    assert output(dag) == EXPECTED
    assert not any(checkpoints.rglob("commits"))  # released once the output was committed


def store_objects(dag):
    store = dag.task_dict["squares"].store
    prefix = store.layout.checkpoints_prefix(RunRef("ft_checkpointed", RUN_ID), "squares")
    return store, prefix


def test_a_retry_on_another_worker_restores_the_checkpoint_from_the_store(
    make_pipeline, monkeypatch, tmp_path
):
    dag, checkpoints, failed = make_pipeline("spark-connect")
    run(dag, "numbers", 1)
    with pytest.raises(Exception, match=failed.format(3)):
        run(dag, "squares", 1, [{"task": "squares", "mode": "batch", "batch": 3}])
    # The worker is lost with its disk; the retry runs on another one, with another local directory.
    shutil.rmtree(checkpoints)
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__CHECKPOINT_LOCAL_DIR", str(tmp_path / "worker-b"))
    pushed = run(dag, "squares", 2)
    summary = pushed["squares"]["checkpoint"]
    assert (summary["why"], summary["restored_via"]) == ("resume", "store") and summary["restored_bytes"] > 0
    assert [(t, k) for t, k, _ in restores(dag)[:2]] == [(1, None), (2, 2)]
    # Batches 0-2's output was not fetched (left in the store, committed by copies): counted from notes.
    assert pushed["squares"]["rows"] == apps.ROWS
    # the file-source log was moved to this worker's paths: batches 0-2 are not read again
    assert summary["input_bytes_read"] == pytest.approx(summary["input_bytes"] * 5 / 8, rel=0.15)
    assert output(dag) == EXPECTED
    store, prefix = store_objects(dag)
    assert store.list_objects(prefix) == {}  # released with the committed output


def test_local_recovery_restores_from_the_verified_local_copy_without_reading_the_store(make_pipeline):
    dag, checkpoints, failed = make_pipeline("spark-connect", **{"state.backend.local-recovery": "true"})
    run(dag, "numbers", 1)
    with pytest.raises(Exception, match=failed.format(3)):
        run(dag, "squares", 1, [{"task": "squares", "mode": "batch", "batch": 3}])
    # Only the _metadata remain in the store: a retry that read a checkpoint object would fail.
    store, prefix = store_objects(dag)
    store.delete_keys([k for k in store.list_objects(prefix) if "/objects/" in k])
    pushed = run(dag, "squares", 2)
    summary = pushed["squares"]["checkpoint"]
    assert (summary["why"], summary["restored_via"], summary["restored_bytes"]) == ("resume", "local", 0)
    assert output(dag) == EXPECTED


def test_a_damaged_local_copy_falls_back_to_the_store(make_pipeline):
    dag, checkpoints, failed = make_pipeline("spark-connect", **{"state.backend.local-recovery": "true"})
    run(dag, "numbers", 1)
    with pytest.raises(Exception, match=failed.format(3)):
        run(dag, "squares", 1, [{"task": "squares", "mode": "batch", "batch": 3}])
    [output_dir] = checkpoints.rglob("out/squares")  # batch 1's files, as Spark's file sink logged them
    part = (
        output_dir
        / sorted(committed_names(output_dir, through=1) - committed_names(output_dir, through=0))[0]
    )
    part.write_bytes(part.read_bytes()[:-20])  # a disk error in the output of batch 1
    pushed = run(dag, "squares", 2)
    summary = pushed["squares"]["checkpoint"]
    assert (summary["why"], summary["restored_via"]) == ("resume", "store")
    assert output(dag) == EXPECTED


def test_a_worker_killed_between_the_last_micro_batch_and_the_commit_loses_nothing(make_pipeline, s3_bucket):
    """SIGKILL of the whole try (a worker lost) after its last micro-batch, before the commit: nothing is
    visible, and the retry resumes from the last checkpoint the dead try had copied to the store."""
    dag, _, _ = make_pipeline("spark-connect")
    run(dag, "numbers", 1)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    )
    kill = '[{"task": "squares", "mode": "kill"}]'
    child = subprocess.run(
        [sys.executable, "-m", "tests.unit.stage_try.checkpoint_try", s3_bucket.url, "squares", "1", kill],
        env=env, cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    store, prefix = store_objects(dag)
    with pytest.raises(PartitionNotFound):
        store.manifest(RunRef("ft_checkpointed", RUN_ID).parse("squares"))  # no partial partition
    assert any(k.endswith("/_metadata") for k in store.list_objects(prefix))
    # The dead try's failure, recorded as the retry policy records it (a live Airflow's next try does
    # this itself through the REST API: tests/cluster kills whole workers).
    ti = TaskInstance(map_index=-1, try_number=1, pushed={}, task_id="squares", dag_id=dag.dag_id)
    conf = types.SimpleNamespace(conf={})
    context = {"ti": ti, "dag": dag, "run_id": RUN_ID, "dag_run": conf, "params": {}}
    dag.task_dict["squares"].retry_policy.evaluate(RuntimeError("worker lost"), 1, 100, context)
    pushed = run(dag, "squares", 2)
    summary = pushed["squares"]["checkpoint"]
    assert summary["why"] == "resume" and summary["restored_from"] is not None
    assert output(dag) == EXPECTED
