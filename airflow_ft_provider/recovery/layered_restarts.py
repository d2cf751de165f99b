"""A pipeline's restart configuration, in one place: where it comes from, where it must not.

* Flink's keys and their meaning are the core's (``failover/restart_config.py``: parsing, validation,
  deprecated keys). Everything Airflow adds is here:
* the layering: the cluster's ``[ft_provider]`` restart keys, overridden key by key by the pipeline's
  ``restart_strategy=`` (and ``failover_strategy=``), validated when the DAG is parsed
  (``pipeline_restart_config``);
* a stage's own ``retries`` / ``retry_policy`` (as arguments or through default_args) would be replaced
  by the restart strategy's policy, so the pipeline refuses them with the place they came from;
* what the retry policy does when the decision cannot be recorded (``unrecorded_retry``).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from datetime import timedelta

from airflow.sdk import RetryDecision

from airflow_ft_provider._compat import Task, given_arguments, is_mapped, mapped_operator_class
from airflow_ft_provider.failover import (
    FAILOVER_STRATEGY_KEY,
    RESTART_STRATEGY_KEYS,
    failover_strategy_name,
    load_restart_strategy,
)
from airflow_ft_provider.failover.restart_config import resolve_deprecated_keys
from airflow_ft_provider.failover.restart_options import BATCH_PIPELINE_DEFAULTS, DEPRECATED_TYPE_KEY

CLUSTER_SOURCE = "[ft_provider] of airflow.cfg"


def cluster_keys(keys: Iterable[str]) -> dict[str, object]:
    """Those of ``keys`` set (not empty) in ``[ft_provider]`` of airflow.cfg: the cluster's layer under
    a pipeline's own settings (restart keys here, checkpoint keys in stage_settings.py)."""
    from airflow.sdk import conf

    return {
        key: value for key in keys if (value := conf.get("ft_provider", key, fallback=None)) not in (None, "")
    }


def cluster_restart_config() -> dict[str, object]:
    """The restart and failover strategy keys set in ``[ft_provider]`` of airflow.cfg (validated here,
    so that a bad cluster value names where it came from)."""
    config = cluster_keys((*RESTART_STRATEGY_KEYS, DEPRECATED_TYPE_KEY, FAILOVER_STRATEGY_KEY))
    config = resolve_deprecated_keys(config, source=CLUSTER_SOURCE)
    try:
        load_restart_strategy(config, partitions_persisted=True)
        failover_strategy_name(config)
    except ValueError as err:
        raise ValueError(f"{err} (set in {CLUSTER_SOURCE})") from None
    return config


def pipeline_restart_config(
    own: Mapping[str, object], *, failover_strategy: str | None, partitions_persisted: bool
) -> dict[str, object]:
    """The restart configuration of one pipeline: the cluster's keys, overridden key by key by its own.

    The deprecated 'restart-strategy' is resolved within each layer, so a pipeline's old key still
    overrides the cluster's new one (Flink reads a job's option with its deprecated keys). Validated
    now, when the DAG is parsed, not at the first failure."""
    config = {
        **BATCH_PIPELINE_DEFAULTS,
        **cluster_restart_config(),
        **resolve_deprecated_keys(own, source="restart_strategy= of FailoverPipeline"),
    }
    if failover_strategy is not None:
        config[FAILOVER_STRATEGY_KEY] = failover_strategy
    load_restart_strategy(config, partitions_persisted=partitions_persisted)
    return config


# When the recovery journal cannot be reached (S3 down) the failure stays unhandled; the next try
# handles it in before_work (as after a killed process), so retry rather than guess a decision -- with
# a growing delay (5 s, 10 s, ... at most 5 min) and not forever: a store unreachable for about half an
# hour fails the task.
UNRECORDED_FIRST_DELAY = timedelta(seconds=5)
UNRECORDED_MAX_DELAY = timedelta(minutes=5)
UNRECORDED_GIVE_UP_TRY = 12


# A try that dies before its code runs (its worker's disk full, the API server down) never reaches the
# retry policy, and Airflow retries it after ``retry_delay``: a fixed 1 s spent 49 such tries in 90 s on
# a full disk. They back off instead, 1 s doubling, a minute apart at most (a killed process's next try
# also waits this long before its gate).
UNSEEN_TRY_RETRY: dict[str, object] = {
    "retry_delay": timedelta(seconds=1),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=1),
}


def unrecorded_retry(try_number: int, err: Exception) -> RetryDecision:
    """The retry policy's answer when region failover could not record a failure."""
    if try_number >= UNRECORDED_GIVE_UP_TRY:
        return RetryDecision.fail(
            reason=f"region failover could not reach its recovery journal for {try_number} tries ({err}); "
            "check the partition store (S3 endpoint, credentials) and clear the task to go on"
        )
    delay = min(UNRECORDED_FIRST_DELAY * 2 ** max(0, try_number - 1), UNRECORDED_MAX_DELAY)
    return RetryDecision.retry(delay=delay, reason=f"failover not recorded: {err}")


def own_retry_settings(task: Task) -> dict[str, object]:
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


def where_set(task: Task, name: str, value: object) -> str:
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
