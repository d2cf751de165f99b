"""A relative ``application`` is a file beside the DAG file, not of the worker's working directory."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pytest
from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator

HERE = Path(__file__).resolve().parent


def stage(application: str) -> SparkStageOperator:
    with DAG("ft_application_path", schedule=None, start_date=datetime(2026, 1, 1)):
        return SparkStageOperator(task_id="s", application=application)


def test_a_relative_path_is_taken_from_the_dag_files_folder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # what a worker's working directory happens to be
    assert stage(Path(__file__).name).resolved_application() == str(HERE / Path(__file__).name)
    assert stage(f"../operators/{Path(__file__).name}").resolved_application() == os.path.join(
        HERE, "..", "operators", Path(__file__).name
    )


@pytest.mark.parametrize(
    "application",
    [
        "/opt/jobs/clean.py",
        "local:///opt/jobs/clean.py",
        "s3a://bucket/jobs/clean.py",
        "hdfs://nn/jobs/clean.py",
    ],
)
def test_absolute_paths_and_uris_are_kept(application):
    assert stage(application).resolved_application() == application


def test_a_missing_file_is_a_clear_error_naming_where_it_was_looked_for():
    with pytest.raises(FileNotFoundError) as missing:
        stage("jobs/clean.py").resolved_application()
    assert (
        f"application 'jobs/clean.py' is not a file beside the DAG file ({HERE / 'jobs' / 'clean.py'})"
        in str(missing.value)
        and "resolved against the DAG file's folder" in str(missing.value)
    )
