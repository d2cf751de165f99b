"""Fault injection for demos, tests, chaos runs and benchmarks: off unless the deployment allows it.

A run asks for faults in its conf (or the DAG's params)::

    {"ft_faults": [
        {"task": "score", "times": 1},                         # raise before submitting, on try 1
        {"task": "clean[2]", "times": 2, "mode": "app"},       # fail inside the Spark application
        {"task": "report", "mode": "kill"},                    # SIGKILL of the task process mid-stage
        {"task": "daily_revenue", "delete": ["scored"]},       # lose partitions before the stage reads
        {"task": "daily_revenue", "truncate": ["scored"]},     # cut a data object of each in half
        {"task": "score", "mode": "batch", "batch": 3}         # fail inside micro-batch 3 (checkpointed)
    ]}

``task`` is a core task id (``stage`` or ``stage[i]``); a fault fires while try_number <= ``times``
(default 1). With ``delete`` or ``truncate`` and no ``mode`` the stage only damages its inputs
(``mode: none``) and then fails by itself with PartitionNotFound (missing object / size mismatch).

These faults kill processes and damage data, and anyone allowed to trigger a run can write a run's
conf: they act only where ``[ft_provider] allow_fault_injection`` is true (test and demo deployments).
Otherwise a run that asks for them gets a warning in the task log and runs without them.

This package is the seam a stage try calls (``faults_for``): a try whose run asks for no faults gets
``NO_FAULTS`` and never loads the implementation (``faults.injection``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from airflow_ft_provider.faults.request import (
    ALLOW_KEY,
    FAULTS_KEY,
    NO_FAULTS,
    NoFaults,
    TryFaults,
    requested_faults,
)
from airflow_ft_provider.task_log import TaskLog

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_ft_provider.failover.graph import StageGraph
    from airflow_ft_provider.partitions import RunRef, S3PartitionStore

__all__ = ["ALLOW_KEY", "FAULTS_KEY", "NO_FAULTS", "NoFaults", "TryFaults", "faults_for", "requested_faults"]


def faults_for(
    context: Context,
    core_task: str,
    *,
    graph: StageGraph,
    store: S3PartitionStore,
    run: RunRef,
    log: TaskLog,
    later: Collection[str] = (),
) -> TryFaults:
    """The faults this try must inject (``injection.injector_for``); none, without loading anything,
    when the run asks for none."""
    if not requested_faults(context):
        return NO_FAULTS
    from airflow_ft_provider.faults.injection import injector_for

    return injector_for(context, core_task, graph=graph, store=store, run=run, log=log, later=later)
