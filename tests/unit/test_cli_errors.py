"""``airflow-ft`` answers a bad argument with one clear line, never a traceback, before it reads anything.

    A --a--> B[0..1]          (B mapped over two map indexes)
"""

from __future__ import annotations

import pytest

from airflow_ft_provider.cli import main

DAG_FILE = '''
from datetime import datetime
from airflow.sdk import DAG
from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

with DAG("ft_cli_errors", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    with FailoverPipeline():
        SparkStageOperator(task_id="A", application="x.py", outputs=["a"])
        SparkStageOperator.partial(task_id="B", application="x.py", inputs=["a"]).expand(application_args=[[], []])
'''


@pytest.fixture
def dags(tmp_path, monkeypatch):
    monkeypatch.delenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL", raising=False)
    (tmp_path / "ft_cli_errors.py").write_text(DAG_FILE)
    return str(tmp_path)


def run(capsys, *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stopped:
        main(["restart-region", "--dag-id", "ft_cli_errors", "--run-id", "manual__1", *argv])
    return stopped.value.code, capsys.readouterr().err


@pytest.mark.parametrize("task", ["b[x]", "B[", "B[1", "B]0[", "B[-1]", "B [0]"])
def test_a_malformed_task_is_a_usage_error(capsys, dags, task):
    code, err = run(capsys, "--dags-folder", dags, "--task", task)
    assert code == 2 and f"invalid task {task!r}" in err and "score[3]" in err and "Traceback" not in err


@pytest.mark.parametrize(("task", "says"), [
    ("Z", "'Z' is not a task of pipeline 'ft_cli_errors'; tasks: A, B[0], B[1]"),
    ("B[7]", "'B[7]' is not a task of pipeline 'ft_cli_errors'"),
    ("A[0]", "'A[0]' is not a task of pipeline 'ft_cli_errors'"),
])
def test_a_task_the_pipeline_does_not_have_is_a_clear_error(capsys, dags, task, says):
    code, err = run(capsys, "--dags-folder", dags, "--task", task)
    assert code == 1 and says in err and "Traceback" not in err
