"""[ft_provider] preload_stage_clients: the scheduler and a Celery worker load the Spark Connect client,
botocore's S3 data and the stage try's modules when they start, with Airflow's defaults, unless
switched off (on by default).

Each case is a fresh interpreter that loads the providers' configuration as every Airflow command does
before it runs (``providers_configuration_loaded``; ``[core] lazy_load_plugins`` at its default, so no
plugin is imported); a task process forked from it inherits what it loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from airflow_ft_provider.execution.preload import STAGE_TRY_MODULES
from ft_harness.runners import HUNG_AFTER_SECONDS

PROBE = """
import os, sys
sys.argv = ["/venv/bin/airflow", "scheduler"]  # as in the scheduler, whose executor workers fork tasks
import airflow  # the scheduler's first step: Airflow reads the providers' metadata while it starts
from airflow.providers_manager import ProvidersManager
ProvidersManager().initialize_providers_configuration()  # what the scheduler command does next
assert "airflow_ft_provider.plugins.failover_ui" not in sys.modules  # no plugin was the door
from airflow_ft_provider.execution.preload import preloaded
child = os.fork()
if child == 0:  # what a forked task process finds, and what its first S3 client has to parse
    spark_client = preloaded()
    import botocore.loaders
    from airflow_ft_provider.partitions.s3_models import boto3_session  # what the store's hook uses
    parsed = []
    load_file = botocore.loaders.JSONFileLoader.load_file
    def recording(self, path):
        parsed.append(path)
        return load_file(self, path)

    botocore.loaders.JSONFileLoader.load_file = recording
    session = boto3_session(aws_access_key_id="key", aws_secret_access_key="secret", region_name="eu-west-1")
    session.client("s3", endpoint_url="http://127.0.0.1:9").can_paginate("list_objects_v2")
    from airflow_ft_provider.execution.preload import STAGE_TRY_MODULES
    try_modules = sum(m in sys.modules for m in STAGE_TRY_MODULES)
    print(f"spark client {'loaded' if spark_client else 'not loaded'}, {len(parsed)} S3 data files parsed, "
          f"{try_modules} of {len(STAGE_TRY_MODULES)} stage try modules", flush=True)
    os._exit(0)
os.waitpid(child, 0)
"""


@pytest.mark.parametrize(("setting", "loaded"), [("False", False), ("True", True), (None, True)])
def test_the_clients_are_loaded_before_the_fork_unless_switched_off(setting, loaded, tmp_path):
    unset = ("AIRFLOW__FT_PROVIDER__PRELOAD_STAGE_CLIENTS", "AIRFLOW__CORE__LAZY_LOAD_PLUGINS")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["AIRFLOW_HOME"] = str(tmp_path)  # a fresh airflow.cfg: the provider's defaults, not this machine's
    if setting is not None:  # None: the default, on
        env["AIRFLOW__FT_PROVIDER__PRELOAD_STAGE_CLIENTS"] = setting
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=HUNG_AFTER_SECONDS
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = result.stdout.strip().splitlines()[-1]
    modules = len(STAGE_TRY_MODULES)
    if loaded:
        expected = f"spark client loaded, 0 S3 data files parsed, {modules} of {modules} stage try modules"
        assert found == expected, found
    else:
        assert found.startswith("spark client not loaded, ") and f" 0 of {modules} stage try" in found, found
        assert ", 0 S3 data files parsed" not in found, found


@pytest.mark.parametrize(
    ("argv", "forks"),
    [
        (["/venv/bin/airflow", "scheduler"], True),
        (["airflow", "celery", "worker", "-q", "default"], True),
        (["airflow", "api-server"], False),
        (["airflow", "dag-processor"], False),
        (["airflow", "triggerer"], False),
        (["airflow", "db", "migrate"], False),
        (["airflow", "celery", "flower"], False),
    ],
)
def test_only_the_components_that_fork_task_processes_preload(argv, forks):
    from airflow_ft_provider.execution.preload import forks_task_processes

    assert forks_task_processes(argv) is forks
