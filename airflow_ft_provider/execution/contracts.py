"""The seams of a stage try: the stage a backend runs, the backend, and where data is placed.

Typed here so that the try (``stage_try/attempt.py``) reaches no attribute a contract does not
name: a backend that keeps no pipelined partitions still answers ``server``, ``holds`` and ``drop``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self

from airflow_ft_provider.execution.connect_sessions import TrySession
from airflow_ft_provider.partitions import Manifest, PartitionRef, Producer, StoredCopy
from airflow_ft_provider.partitions.pipelined_handle import PipelinedHandle
from airflow_ft_provider.partitions.provenance import UNKNOWN, Provenance
from airflow_ft_provider.spark.spec import (
    InputPartition,
    OutputSpec,
    StageSpec,
    StoreAccess,
    StoreCredentials,
)


class SparkSubmitter(Protocol):
    """What a spark-submit try uses of the apache-spark provider's ``SparkSubmitHook``."""

    def submit(self, application: str = "", **kwargs: object) -> object: ...

    def on_kill(self) -> None: ...


class StageSettings(Protocol):
    """What a backend reads of the stage it runs (``SparkStageOperator``'s arguments)."""

    @property
    def task_id(self) -> str: ...
    @property
    def dag_id(self) -> str: ...
    @property
    def application(self) -> str | None: ...
    @property
    def python_callable(self) -> Callable[..., object] | None: ...
    @property
    def application_args(self) -> list[object]: ...
    @property
    def conf(self) -> dict[str, object]: ...
    @property
    def env_vars(self) -> dict[str, str]: ...
    @property
    def spark_name(self) -> str | None: ...
    @property
    def spark_submit_kwargs(self) -> dict[str, object]: ...

    def spark_hook(self, **kwargs: Any) -> SparkSubmitter:
        """The SparkSubmitHook a spark-submit try submits with (its arguments are the hook's)."""


@dataclass(frozen=True)
class WrittenOutput:
    """What the application reported of one output it wrote: its rows, and the checksum of the rows
    (``spark/content.py``; None when Spark could not compute one, or for a view)."""

    rows: int
    content: str | None = None


class StageBackend(Protocol):
    """What a stage try needs from the way its Spark work runs (a context manager around the work)."""

    name: str
    keeps_pipelined: bool  # pipelined outputs stay in the engine (views) instead of S3 scratch

    @property
    def server(self) -> str | None:
        """The engine that keeps them (a Spark Connect server); None when none does."""

    @property
    def try_session(self) -> TrySession | None:
        """The Connect session this try works in, which outlives the worker; None when none does."""

    def __enter__(self) -> Self: ...

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        """``exc_type`` None: the try's work ended (a Connect session is then handed on)."""

    def run(
        self, spec: StageSpec, *, fail_in_app: bool = False, credentials: StoreCredentials | None = None
    ) -> None:
        """Run the application to the end; raise if it failed. ``credentials``: the store's, for the
        executors (``spec.store``), passed where no log or Spark conf shows them."""

    def written(self, output: OutputSpec) -> WrittenOutput:
        """What the application wrote to ``output``; StageOutputMissing if it wrote nothing there."""

    def kill(self) -> None:
        """Stop the running work (the operator's on_kill)."""

    def view_name(self, partition: str, execution: str) -> str:
        """The engine's name for one execution of one pipelined partition it keeps."""

    def held_rows(self, view: str) -> int | None:
        """The rows of ``view`` as the engine holds it now (None: it holds no such view, or no engine
        keeps partitions): compared with the rows published, it catches a view whose data changed."""

    def drop(self, view: str) -> None:
        """Release ``view`` and its data in the engine (nothing where no engine keeps partitions)."""


class Killable(Protocol):
    """Work the operator's ``on_kill`` stops (a running stage try)."""

    def kill(self) -> None: ...


class PlannedWrite(Protocol):
    """One output a try planned: its partition, and the attempt the application writes into (if any)."""

    @property
    def ref(self) -> PartitionRef: ...
    @property
    def attempt(self) -> str | None: ...
    @property
    def pipelined(self) -> bool: ...


class DataPlacement(Protocol):
    """Where a try reads and writes partition data (``placement.ExecutorS3``, ``StagedFiles`` or
    ``DirectS3a``)."""

    name: str
    read: dict[str, Manifest]  # partition id -> the manifest of each blocking input read (lineage)

    @property
    def access(self) -> StoreAccess | None:
        """Where the executors reach the store (the spec's ``store``); None: they read given paths."""

    @property
    def credentials(self) -> StoreCredentials | None:
        """The key pair the executors use (None: their own, or no executor access)."""

    def input_partition(
        self, ref: PartitionRef, result: str, number: int, handle: PipelinedHandle | None
    ) -> InputPartition:
        """What the application reads of one input partition (paths or objects), verified."""

    def discard(self, outputs: Iterable[PlannedWrite], try_number: int) -> None:
        """Remove what a failed application wrote of ``outputs`` (none of it is ever committed)."""

    def output_location(
        self, ref: PartitionRef, result: str, *, pipelined: bool, try_number: int
    ) -> tuple[str, str | None]:
        """Where the application writes one output, and the attempt id (S3 placements) or None."""

    def commit(
        self,
        ref: PartitionRef,
        location: str,
        attempt: str | None,
        *,
        pipelined: bool,
        producer: Producer,
        compression: str,
        rows: int,
        copy_from: Mapping[Path, StoredCopy] | None = None,
        provenance: Provenance = UNKNOWN,
    ) -> Manifest:
        """Publish what the application wrote at ``location`` (a manifest, conditionally);
        ``copy_from``: its files already in the store (a checkpoint's copy), copied inside S3;
        ``provenance``: what a blocking output holds and was computed from (reuse)."""
