"""Where a run's pipeline and store are (used through ``run_recovery.RunRecovery``).

A run's recovery follows the pipeline stored with the run (``_failover/pipeline.json``), not whatever
the DAG file says now: the first stage try of a run stores the description it parsed (a conditional
create). A later try that parsed a different description (the DAG file was edited) replaces the
stored one only while no restart is pending; during a recovery the graph the decisions were made on
stays, and the try says so in its log. Components that never parse DAG files (the UI plugin,
``airflow-ft``) only ever read the stored description (``RunRecovery.for_reader``).
"""

from __future__ import annotations

import logging

from airflow_ft_provider.model.description import PipelineDescription
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
