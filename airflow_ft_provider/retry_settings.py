"""Where a stage's restarts are configured, and where they must not be.

Flink's layering: the cluster's ``[ft_provider]`` restart keys, overridden key by key by the
pipeline's ``restart_strategy=``. A stage's own ``retries`` / ``retry_policy`` (given as arguments or
through default_args) would be replaced by the restart strategy's policy, so the pipeline refuses them
with the place they came from.
"""

from __future__ import annotations

import inspect
from typing import Any

from airflow_ft_provider._compat import given_arguments, is_mapped, mapped_operator_class
from airflow_ft_provider.failover import (
    FAILOVER_STRATEGY_KEY,
    RESTART_STRATEGY_KEYS,
    failover_strategy_name,
    load_restart_strategy,
)
from airflow_ft_provider.failover.restart_config import DEPRECATED_TYPE_KEY, resolve_deprecated_keys


def cluster_restart_config() -> dict[str, object]:
    """The restart and failover strategy keys set in ``[ft_provider]`` of airflow.cfg (validated here,
    so that a bad cluster value names where it came from)."""
    from airflow.sdk import conf

    config: dict[str, object] = {}
    for key in (*RESTART_STRATEGY_KEYS, DEPRECATED_TYPE_KEY, FAILOVER_STRATEGY_KEY):
        value = conf.get("ft_provider", key, fallback=None)
        if value not in (None, ""):
            config[key] = value
    config = resolve_deprecated_keys(config, source="[ft_provider] of airflow.cfg")
    try:
        load_restart_strategy(config, partitions_persisted=True)
        failover_strategy_name(config)
    except ValueError as err:
        raise ValueError(f"{err} (set in [ft_provider] of airflow.cfg)") from None
    return config


def own_retry_settings(task: Any) -> dict[str, object]:
    """``retries`` / ``retry_policy`` as the DAG author gave them: as arguments, through default_args
    (the DAG's, a TaskGroup's or the task's) or to ``.partial()``; Airflow's defaults are not listed.

    A mapped operator keeps only merged arguments, so there a value equal to the operator's default
    (``[core] default_task_retries``, usually 0) cannot be told apart from no value.
    """
    kwargs = given_arguments(task)
    if is_mapped(task):
        default = default_retries(mapped_operator_class(task))
        found = {"retries": kwargs["retries"]} if kwargs.get("retries", default) != default else {}
    else:
        found = {"retries": kwargs["retries"]} if "retries" in kwargs else {}
    if kwargs.get("retry_policy") is not None:
        found["retry_policy"] = kwargs["retry_policy"]
    return found


def default_retries(operator_class: type) -> object:
    """The ``retries`` an operator class gets when nobody sets it (Airflow's rule for .partial())."""
    for cls in operator_class.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        parameter = inspect.signature(init).parameters.get("retries")
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return parameter.default
    return None


def where_set(task: Any, name: str, value: object) -> str:
    """Where a retry setting most likely came from, for the error message."""
    group = getattr(task, "task_group", None)
    group_args = getattr(group, "default_args", None) or {}
    if group is not None and name in group_args and group_args[name] == value:
        return f"from default_args of TaskGroup {group.group_id!r}"
    dag = getattr(task, "dag", None)
    dag_args = (dag.default_args or {}) if dag is not None else {}
    if dag is not None and name in dag_args and dag_args[name] == value:
        return f"from default_args of DAG {dag.dag_id!r}"
    return "as an argument of the stage" + (" or its .partial()" if is_mapped(task) else "")
