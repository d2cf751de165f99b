"""Seed 003's monitoring of one try's checkpoints, whichever data path took them: a sentence in the
task log, ``CheckpointsTaken`` in the run's history, and the metrics. Statistics never fail a try (nor
hide its failure)."""

from __future__ import annotations

from typing import Protocol

from airflow_ft_provider import metrics
from airflow_ft_provider.recovery.journal_events import CheckpointsTaken
from airflow_ft_provider.stage_try.scope import TryScope


class TryStatistics(Protocol):
    """``uploader.CheckpointStats`` (staged) and ``stream_stats.StreamStats`` (executors)."""

    def describe(self, task: str, try_number: int, *, succeeded: bool) -> str: ...

    def as_dict(self) -> dict[str, object]: ...


def report_checkpoints(scope: TryScope, stats: TryStatistics, *, succeeded: bool) -> None:
    try:
        sentence = stats.describe(scope.task, scope.try_number, succeeded=succeeded)
        scope.log.info("%s", sentence)
        statistics = stats.as_dict()
        metrics.checkpoints(statistics, dag_id=scope.run.pipeline, task_id=scope.task)
        scope.recovery.record_try(
            CheckpointsTaken(
                task=scope.task,
                try_number=scope.try_number,
                reason=sentence,
                succeeded=succeeded,
                statistics=statistics,
            )
        )
    except Exception as err:  # noqa: BLE001 - statistics never fail a try (nor hide its failure)
        scope.log.warning("%s: checkpoint statistics not recorded: %s", scope.task, err)
