"""How the application of a try runs: plainly, in a scratch directory of its own, or checkpointed
(``checkpointed.py``), resuming in the stage's task-local checkpoint directory. The try's phases do
not ask which: both give the directory, the checkpoint part of the spec and, at the end, what the
commit needs of them (``RunFinished``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from airflow_ft_provider.execution.workdir import TryWorkdir
from airflow_ft_provider.partitions import StoredCopy
from airflow_ft_provider.spark.spec import CheckpointSpec
from airflow_ft_provider.task_log import TaskLog


@dataclass(frozen=True)
class RunFinished:
    """The application's micro-batches (if any) are done."""

    stored: Mapping[Path, StoredCopy] = field(default_factory=dict)  # output files a checkpoint has in S3
    summary: Mapping[str, object] | None = None  # a checkpointed try's restore point and reads, for its XCom


class RunMode(Protocol):
    @property
    def processed(self) -> Collection[str]:
        """Input files a restored checkpoint has read already: not fetched again."""
        ...

    def workdir(self) -> AbstractContextManager[Path]: ...

    def spec(self, *, fail_in_batch: int | None) -> CheckpointSpec | None: ...

    def finish(self) -> RunFinished: ...


class PlainRun:
    """An ordinary stage: a new scratch directory, removed when the try ends (``execution/workdir.py``)."""

    processed: Collection[str] = ()

    def __init__(self, log: TaskLog) -> None:
        self.log = log

    def workdir(self) -> AbstractContextManager[Path]:
        return TryWorkdir(log=self.log)

    def spec(self, *, fail_in_batch: int | None) -> CheckpointSpec | None:
        return None

    def finish(self) -> RunFinished:
        return RunFinished()
