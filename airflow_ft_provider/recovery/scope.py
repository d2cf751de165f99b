"""What every job of a run's recovery works on: the run, its pipeline, its store, its journal, the time."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_ft_provider.failover.clock import Clock
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.journal import RecoveryJournal


@dataclass(frozen=True)
class RunScope:
    pipeline: PipelineDescription  # the one the run's recovery follows (its stored description)
    run: RunRef
    store: S3PartitionStore
    journal: RecoveryJournal
    clock: Clock
