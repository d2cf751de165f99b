"""Load a stage's clients once per worker instead of once per stage try.

A Connect stage's task process spends 2.5-3.5 CPU-seconds importing ``pyspark.sql.connect`` (with
pandas, pyarrow and grpc) before it sends its first query: more than the stage's own work on a warm
server. Every stage try, in either mode, also imports boto3's S3 transfer code and parses botocore's
S3 data files for its partition store (~0.5 CPU-s). Airflow forks every task process from its worker
(LocalExecutor worker, Celery pool process), so what is loaded there before the fork costs nothing
per try.

The stage try's own modules (``STAGE_TRY_MODULES``, with the amazon provider's hooks they import) are
loaded there too.

Every Airflow command reads the providers' metadata before it runs (``providers_configuration_loaded``),
whatever ``[core] lazy_load_plugins`` says; this provider's ``get_provider_info`` calls
:func:`preload_if_configured`, which loads both when ``[ft_provider] preload_stage_clients`` is on, in
the commands that fork task processes (plugins are no such door: with Airflow's default
``lazy_load_plugins = True`` a worker never imports them before it forks). Only
modules and parsed data are loaded: no Spark session, gRPC channel, S3 connection or thread exists
before the fork (gRPC channels and connection pools must not cross a fork).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time

from airflow_ft_provider.execution.spark_client import CLIENT_MODULE, preloaded

log = logging.getLogger(__name__)
CONFIG_KEY = "preload_stage_clients"
# What a stage try imports when it runs (the operator imports them in ``execute``, and the DAG file
# the operator, the pipeline and the decorators; a spark-submit stage, the Spark provider's hook):
# ~0.1 CPU-s per try when each task process imports them afresh.
STAGE_TRY_MODULES = (
    "airflow_ft_provider.pipeline",
    "airflow_ft_provider.decorators",
    "airflow_ft_provider.operators.spark_stage",
    "airflow_ft_provider.operators.try_gate",
    "airflow_ft_provider.stage_try.attempt",
    "airflow_ft_provider.stage_try.scope",
    "airflow_ft_provider.recovery.run_recovery",
    "airflow_ft_provider.recovery.retry_policy",
    "airflow_ft_provider.hooks.partition_store",
    "airflow_ft_provider.faults",
    "airflow_ft_provider.lineage",
    "airflow_ft_provider.metrics",
    "airflow.providers.apache.spark.hooks.spark_submit",
)
__all__ = [
    "CLIENT_MODULE",
    "CONFIG_KEY",
    "STAGE_TRY_MODULES",
    "forks_task_processes",
    "preload_if_configured",
    "preloaded",
]


def forks_task_processes(argv: list[str]) -> bool:
    """Whether this Airflow command forks task processes: the scheduler (LocalExecutor's workers) and
    a Celery worker. The API server, DAG processor, triggerer and CLI calls skip the import."""
    words = [os.path.basename(a) for a in argv[:4]]
    return "scheduler" in words or ("celery" in words and "worker" in words)


def preload_if_configured(argv: list[str] | None = None) -> bool:
    """Load the stage clients now if ``[ft_provider] preload_stage_clients`` is on and this process
    forks task processes; True if they are loaded."""
    if not forks_task_processes(sys.argv if argv is None else argv):
        return preloaded()
    try:
        from airflow.configuration import conf
    except ImportError:  # asked while ``import airflow`` builds its configuration: Airflow asks again
        log.debug("stage clients: the configuration is not built yet")
        return preloaded()
    if not conf.getboolean("ft_provider", CONFIG_KEY, fallback=True):
        return preloaded()
    if preloaded():
        return True
    started = time.monotonic()
    import pyspark.sql.connect.session  # noqa: F401
    import pyspark.sql.functions  # noqa: F401

    import airflow_ft_provider.execution.connect  # noqa: F401
    from airflow_ft_provider.partitions.s3_models import warm_s3_models

    warm_s3_models()
    for module in STAGE_TRY_MODULES:
        importlib.import_module(module)
    log.info(
        "Spark Connect and S3 clients and the stage try's modules preloaded in %.1f s (pid %d): stage "
        "tries forked from here skip their imports",
        time.monotonic() - started,
        os.getpid(),
    )
    return True
