"""A stage's identity for reuse: a digest of what decides its results besides its inputs.

Part of every blocking output's lineage (``partitions/provenance.py``): the application's code (the
file's bytes, or the callable's source), its arguments, its environment variables and its Spark conf,
less the settings that only say how it runs (memory, cores, UI, event log...). Hashed only: nothing of it
is stored. Code that cannot be read here (an application on HDFS or S3, a callable without source) has
no identity, and its stage is never reused.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

from airflow_ft_provider.execution.contracts import StageSettings

# Spark settings that change how a stage runs, never what it computes.
OPERATIONAL_CONF_PREFIXES = (
    "spark.ui.",
    "spark.openlineage.",  # the try's parent job (lineage.spark_parent_job_conf): differs every try
    "spark.eventLog.",
    "spark.driver.memory",
    "spark.driver.cores",
    "spark.driver.maxResultSize",
    "spark.executor.memory",
    "spark.executor.cores",
    "spark.executor.instances",
    "spark.dynamicAllocation.",
    "spark.app.name",
    "spark.log.",
)


def _code(stage: StageSettings) -> str | None:
    if stage.python_callable is not None:
        try:
            source = inspect.getsource(stage.python_callable)
        except (OSError, TypeError):
            return None
        return f"callable:{stage.python_callable.__module__}.{stage.python_callable.__qualname__}:{source}"
    if stage.application is None:
        return None
    try:
        content = Path(stage.application).read_bytes()
    except OSError:  # not a local file (hdfs://, s3a://, a path only the cluster has)
        return None
    return f"file:{hashlib.sha256(content).hexdigest()}"


def stage_identity(stage: StageSettings) -> str | None:
    """The digest (64 hex digits) of the stage's code and result-affecting settings; None when its code
    cannot be read here."""
    code = _code(stage)
    if code is None:
        return None
    conf = {
        str(k): str(v)
        for k, v in (stage.conf or {}).items()
        if not str(k).startswith(OPERATIONAL_CONF_PREFIXES)
    }
    doc = {
        "code": code,
        "args": [repr(a) for a in stage.application_args or []],
        "env": sorted((stage.env_vars or {}).items()),
        "conf": sorted(conf.items()),
    }
    return hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode()).hexdigest()
