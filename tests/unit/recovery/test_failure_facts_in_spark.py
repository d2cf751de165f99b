"""Failure classification in real Spark (Connect and spark-submit) and Airflow's task runner
(dag.test()): a code bug fails once, with no restart and its labels on record; a transient failure
restarts as before."""

from pathlib import Path

import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.data.journal_records import stored_events

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.airflow]

HERE = Path(__file__).parent


def test_code_bugs_fail_once_with_their_labels_and_a_flaky_stage_restarts(
    dag_test_home, s3_bucket, tmp_path, spark_connect
):
    dag_file = dag_test_home.add_dag(HERE.parent / "operators" / "dags" / "ft_spark_pipelines.py")
    env = {
        "FT_TEST_APPS": str(HERE.parents[1] / "apps"),
        "FT_TEST_STORE_URL": s3_bucket.url,
        "FT_TEST_MARKERS": str(tmp_path),
        **spark_connect.connection_env("spark_connect_test"),
    }
    result = dag_test_home.run(dag_file, "ft_classified", None, env=env)
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url)
    journal = RecoveryJournal(store, RunRef("ft_classified", result.run_id))
    decisions = {e["task"]: e for e in stored_events(journal) if e.get("kind") == "failover"}

    for task in ("connect_bug", "submit_bug", "fail_fast", "bad_record", "submit_bad_record"):
        ti = result.task(task)
        assert (ti["state"], ti["try_number"]) == ("failed", 1), f"{task} must fail once: {ti}"
        decision = decisions[task]
        assert decision["restart"] is False and decision["labels"]["recoverable"] is False, decision
        assert "not recoverable" in decision["reason"] and "no restart counted" in decision["reason"]
    for task in ("connect_bug", "submit_bug"):  # Spark's analysis error, from the server and the driver
        labels = decisions[task]["labels"]
        assert labels["kind"] == "user code"
        assert labels["error_class"].startswith("UNRESOLVED_COLUMN"), labels
        assert "SQLSTATE 42703" in labels["reason"] and "analysis error" in labels["reason"]
    assert "AirflowFailException" in decisions["fail_fast"]["labels"]["reason"]
    assert "BadRecord" in decisions["bad_record"]["labels"]["reason"]
    assert "BadRecord" in decisions["submit_bad_record"]["labels"]["reason"]  # the driver's report

    flaky = result.task("flaky")
    assert (flaky["state"], flaky["try_number"]) == ("success", 2)
    labels = decisions["flaky"]["labels"]
    assert decisions["flaky"]["restart"] is True and labels["recoverable"] is True
    assert labels["kind"] == "infrastructure"  # ConnectionResetError
    state = journal.load()
    assert state.strategies["run"].failures == 1, "only the flaky failure counts against the budget"
