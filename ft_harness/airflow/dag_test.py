"""``dag.test()`` against a migrated Airflow metadata DB, the S3 test endpoint and local Spark.

Each DAG runs in a process of its own with its own AIRFLOW_HOME (Airflow reads its configuration when
it is imported, so the pytest process stays untouched): a fork of a server that has imported Airflow
once for that home (ft_harness/airflow/dag_test_forkserver.py). The DB is migrated once per session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ft_harness.airflow.dag_test_forkserver import DagTestForkServer
from ft_harness.services.spark_env import spark_environment

REPO = Path(__file__).resolve().parents[2]


@dataclass
class DagTestResult:
    run_id: str
    state: str
    tasks: list[dict[str, Any]]
    output: str

    def errors(self, limit: int = 40) -> str:
        """The error lines of the run's output (the tail alone often shows only Spark shutting down)."""
        lines = [
            line
            for line in self.output.splitlines()
            if any(word in line for word in ("Error", "Exception", "error ", "failed", "Traceback"))
        ]
        return "\n".join(lines[-limit:])

    def task(self, task_id: str, map_index: int = -1) -> dict[str, Any]:
        for ti in self.tasks:
            if ti["task_id"] == task_id and ti["map_index"] == map_index:
                return ti
        raise KeyError(f"no task instance {task_id}[{map_index}] in {self.tasks}")


@dataclass
class DagTestHome:
    home: Path
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._forks = DagTestForkServer(self.env, REPO, self.home / "dag-test-forkserver.log")

    def close(self) -> None:
        self._forks.close()

    @property
    def dags(self) -> Path:
        return self.home / "dags"

    def add_dag(self, source: Path, name: str | None = None) -> Path:
        target = self.dags / (name or source.name)
        shutil.copy(source, target)
        return target

    def run(
        self,
        dag_file: Path,
        dag_id: str,
        conf: dict | None = None,
        *,
        env: dict | None = None,
        timeout: float = 900,
    ) -> DagTestResult:
        handle, name = tempfile.mkstemp(prefix=f"{dag_id}.", suffix=".log", dir=self.home)
        os.close(handle)  # the run's child opens it for its output
        output = Path(name)
        returncode = self._forks.run(
            [str(dag_file), dag_id, json.dumps(conf or {})], {**self.env, **(env or {})}, output, timeout
        )
        out = output.read_text(errors="replace")
        lines = [line for line in out.splitlines() if line.startswith("DAG_TEST_RESULT ")]
        if returncode != 0 or not lines:
            raise AssertionError(f"dag.test() of {dag_id} crashed (exit {returncode}):\n{out[-6000:]}")
        doc = json.loads(lines[-1].split(" ", 1)[1])
        return DagTestResult(doc["run_id"], doc["state"], doc["tasks"], out)


def airflow_env(
    home: Path, *, s3=None, spark_master: str = "local[1]", extra: dict | None = None
) -> dict[str, str]:
    env = spark_environment()
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": "http://localhost:8080/execution/",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": spark_master}),
            "AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION": "True",  # tests inject faults through ft_faults
            "PYTHONPATH": str(REPO),
        }
    )
    if s3 is not None:
        env["AIRFLOW_CONN_AWS_DEFAULT"] = json.dumps(
            {
                "conn_type": "aws",
                "login": s3.access_key,
                "password": s3.secret_key,
                "extra": {"endpoint_url": s3.url, "region_name": s3.region},
            }
        )
    env.update(extra or {})
    return env


@pytest.fixture(scope="session")
def dag_test_home(tmp_path_factory, s3_endpoint) -> Iterator[DagTestHome]:
    home = tmp_path_factory.mktemp("airflow-home")
    (home / "dags").mkdir()
    env = airflow_env(home, s3=s3_endpoint)
    migrate = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]
    dag_test_home = DagTestHome(home, env)
    yield dag_test_home
    dag_test_home.close()
