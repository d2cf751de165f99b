"""Provider metadata read by Airflow's providers manager (entry point ``apache_airflow_provider``).

The ``[ft_provider]`` config section is the cluster-wide default (Flink's configuration file); a
pipeline's own settings override it. Option defaults come from the core's option table so that the
two cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from airflow_ft_provider import __version__
from airflow_ft_provider.failover.failover_strategies import FAILOVER_STRATEGY_KEY
from airflow_ft_provider.failover.restart_config import OPTIONS, TYPE_KEY

CONFIG_SECTION = "ft_provider"


def _config_options() -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {
        TYPE_KEY: {
            "description": "Default restart strategy: none (off, disable), fixed-delay, failure-rate or "
            "exponential-delay. Unset: exponential-delay when a partition store is configured, else none.",
            "version_added": "0.1.0",
            "type": "string",
            "example": "exponential-delay",
            "default": None,
        },
        FAILOVER_STRATEGY_KEY: {
            "description": "Which tasks restart after a failure: 'region' (the affected failover regions) "
            "or 'full' (the whole DAG run).",
            "version_added": "0.1.0",
            "type": "string",
            "example": "full",
            "default": "region",
        },
    }
    for option in OPTIONS.values():
        options[option.key] = {
            "description": option.description,
            "version_added": "0.1.0",
            "type": {"int": "integer", "float": "float"}.get(option.kind, "string"),
            "example": None,
            "default": str(option.default),
        }
    return options


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-ft-provider",
        "name": "Flink-style fault tolerance for Spark pipelines",
        "description": "Failover regions, re-consumable result partitions on S3 and Flink restart "
        "strategies for Spark batch pipelines run by Airflow.",
        "versions": [__version__],
        "config": {
            CONFIG_SECTION: {
                "description": "Cluster-wide defaults of the restart and failover strategies "
                "(Flink's keys); a pipeline's own settings override them.",
                "options": _config_options(),
            }
        },
    }
