"""Where a run's pipeline and store are: one answer for workers, the DAG processor, the UI and the CLI.

A run's recovery follows the pipeline stored with the run (``_failover/pipeline.json``), not whatever
the DAG file says now: the first stage try of a run stores the description it parsed (a conditional
create). A later try that parsed a different description (the DAG file was edited) replaces the
stored one only while no restart is pending; during a recovery the graph the decisions were made on
stays, and the try says so in its log. Components that never parse DAG files (the UI plugin,
``airflow-ft``) only ever read the stored description.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.model.registry import parsed_pipeline
from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.journal import RecoveryJournal

log = logging.getLogger(__name__)


def partition_store(description: PipelineDescription) -> S3PartitionStore:
    """The store a pipeline names (its URL, else ``[ft_provider] partition_store_url``), reached through
    the pipeline's aws connection."""
    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    return PartitionStoreHook(description.aws_conn_id, url=description.store).get_store()


def settle_run_pipeline(
    parsed: PipelineDescription, store: S3PartitionStore, run_id: str, *, now: float
) -> PipelineDescription:
    """Store ``parsed`` as the run's pipeline unless it already has one a recovery depends on; return the
    description the run's recovery follows from now on."""
    journal = RecoveryJournal(store, RunRef(parsed.dag_id, run_id))
    kept = journal.store_description(parsed, replace_if=lambda: not journal.load().restart_pending(now))
    if kept is not parsed:
        log.warning(
            "DAG %s changed since run %s stored its pipeline, and a restart of that run is pending: recovery "
            "goes on with the stored pipeline until the restart is done (clear the run to start over with "
            "the new one)",
            parsed.dag_id,
            run_id,
        )
    return kept


def run_pipeline(dag_id: str, run_id: str) -> tuple[PipelineDescription, S3PartitionStore]:
    """In a process that parsed the DAG (a worker): the pipeline the run's recovery follows -- the stored
    one, or the parsed one before the first try stored it -- and its store."""
    parsed = parsed_pipeline(dag_id)
    store = partition_store(parsed)
    stored = RecoveryJournal(store, RunRef(dag_id, run_id)).description()
    return (stored if stored is not None else parsed), store


def stored_run_pipeline(store: S3PartitionStore, dag_id: str, run_id: str) -> tuple[RecoveryJournal, Any]:
    """Where no DAG file is parsed (UI, CLI): the run's journal and stored pipeline (None before the first
    stage try)."""
    journal = RecoveryJournal(store, RunRef(dag_id, run_id))
    return journal, journal.description()
