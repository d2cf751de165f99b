"""[ft_provider] preload_spark_client: the plugin module imports the Spark Connect client only when on.

Each case is a fresh interpreter that imports the plugin module as Airflow does at start with
``[core] lazy_load_plugins = False``; a task process forked from it inherits what it imported.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import os, sys
sys.argv = ["/venv/bin/airflow", "scheduler"]  # as in the scheduler, whose executor workers fork tasks
import airflow_ft_provider.plugins.failover_ui
from airflow_ft_provider.execution.preload import preloaded
child = os.fork()
if child == 0:  # what a forked task process finds
    os._exit(0 if preloaded() else 3)
_, status = os.waitpid(child, 0)
print("preloaded" if os.waitstatus_to_exitcode(status) == 0 else "not preloaded")
"""


@pytest.mark.parametrize(("setting", "expected"), [("False", "not preloaded"), ("True", "preloaded")])
def test_the_client_is_imported_before_the_fork_only_when_asked(setting, expected):
    env = {**os.environ, "AIRFLOW__FT_PROVIDER__PRELOAD_SPARK_CLIENT": setting}
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == expected


@pytest.mark.parametrize(("argv", "forks"), [
    (["/venv/bin/airflow", "scheduler"], True),
    (["airflow", "celery", "worker", "-q", "default"], True),
    (["airflow", "api-server"], False),
    (["airflow", "dag-processor"], False),
    (["airflow", "triggerer"], False),
    (["airflow", "db", "migrate"], False),
    (["airflow", "celery", "flower"], False),
])
def test_only_the_components_that_fork_task_processes_preload(argv, forks):
    from airflow_ft_provider.execution.preload import forks_task_processes

    assert forks_task_processes(argv) is forks
