"""Where a stage try reads and writes partition data: the worker's disk (the default), S3 through
Spark's executors, or S3 through Spark's s3a connector (``model/data_path.py``).

All end in the same commit: a manifest for a blocking partition, a scratch manifest and a handle for
a pipelined one kept in S3 (pipelined partitions a Spark Connect server keeps are the backend's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path

from airflow_ft_provider.execution.contracts import DataPlacement, PlannedWrite
from airflow_ft_provider.execution.submit import local_dir
from airflow_ft_provider.model.data_path import DataPath, SparkElsewhere
from airflow_ft_provider.partitions import Manifest, PartitionRef, Producer, S3PartitionStore, StoredCopy
from airflow_ft_provider.partitions.pipelined import PipelinedPartitions
from airflow_ft_provider.partitions.pipelined_handle import PipelinedHandle, execution_id
from airflow_ft_provider.partitions.provenance import UNKNOWN, Provenance
from airflow_ft_provider.partitions.store import new_attempt_id
from airflow_ft_provider.spark.spec import InputPartition, StoreAccess, StoreCredentials, StoredObject

log = logging.getLogger(__name__)


class StagedFiles:
    """Inputs are fetched to the worker's disk and verified; outputs are written there and uploaded
    by the store when committed. The Spark driver must share the worker's disk (local Spark, or a
    Spark Connect server on the same machine)."""

    name = "staged"

    def __init__(self, store: S3PartitionStore, workdir: Path, *, processed: Collection[str] = ()) -> None:
        self.store = store
        self.pipelined = PipelinedPartitions(store)
        self.workdir = workdir
        # "<result>-<n>/<file>": input a resumed checkpointed stage processed already (not fetched)
        self.processed = processed
        self.read: dict[str, Manifest] = {}  # partition id -> the manifest of each blocking input read

    access = None  # the application reads and writes local files
    credentials = None

    def discard(self, outputs: Iterable[PlannedWrite], try_number: int) -> None:
        pass  # the try's scratch directory goes with the try

    def input_partition(
        self, ref: PartitionRef, result: str, number: int, handle: PipelinedHandle | None
    ) -> InputPartition:
        return InputPartition(ref.partition_id, self._paths(ref, result, number, handle))

    def _paths(
        self, ref: PartitionRef, result: str, number: int, handle: PipelinedHandle | None
    ) -> list[str]:
        # Not the partition id: '[' is a glob character in Hadoop paths.
        folder = f"{result}-{number}"
        dest = self.workdir / "in" / folder
        if handle is not None:
            return [p.as_uri() for p in self.pipelined.fetch(ref, handle, dest).paths]
        skip = {name.partition("/")[2] for name in self.processed if name.startswith(folder + "/")}
        fetched = self.store.fetch(ref, dest, skip=skip)
        self.read[ref.partition_id] = fetched.manifest
        if self.store.cache is not None:
            log.info(
                "input %s: %d files from the task-local cache, %d downloaded",
                ref.partition_id,
                fetched.cache_hits,
                fetched.downloaded,
            )
        return [p.as_uri() for p in fetched.paths]

    def output_location(
        self, ref: PartitionRef, result: str, *, pipelined: bool, try_number: int
    ) -> tuple[str, str | None]:
        return (self.workdir / "out" / result).as_uri(), None

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
        if not local_dir(location).is_dir():
            raise SparkElsewhere(
                f"Spark wrote {ref.partition_id} to {location}, which is not on this worker's disk: "
                "data_path 'staged' needs a Spark that shares it (local Spark, a Connect server on this "
                "machine). Spark on other machines: set [ft_provider] data_path = executors (docs: "
                "Running on a cluster)"
            )
        if pipelined:
            return self.pipelined.commit(
                ref,
                local_dir(location),
                producer=producer,
                compression=compression,
                row_count=rows,
                copy_from=copy_from,
            )
        return self.store.commit(
            ref,
            local_dir(location),
            producer=producer,
            compression=compression,
            row_count=rows,
            copy_from=copy_from,
            provenance=provenance,
        )


class _S3Attempts:
    """What the placements in which Spark writes S3 itself share: a new attempt prefix per output, the
    manifests' objects to read (one LIST checks them), and the commit of what was written there."""

    recorded = False  # whether the writer records its files (spark/written.py) instead of a read-back

    def __init__(self, store: S3PartitionStore) -> None:
        self.store = store
        self.pipelined = PipelinedPartitions(store)
        self.read: dict[str, Manifest] = {}  # partition id -> the manifest of each blocking input read

    def discard(self, outputs: Iterable[PlannedWrite], try_number: int) -> None:
        discard_attempts(self.store, outputs, try_number)

    def _objects(self, ref: PartitionRef, handle: PipelinedHandle | None) -> tuple[Manifest, list[str]]:
        if handle is not None:
            return self.pipelined.remote_files(ref, handle)
        manifest, uris = self.store.remote_files(ref)
        self.read[ref.partition_id] = manifest
        return manifest, uris

    def output_location(
        self, ref: PartitionRef, result: str, *, pipelined: bool, try_number: int
    ) -> tuple[str, str | None]:
        attempt = new_attempt_id(try_number)
        location = (
            self.pipelined.attempt_location(ref, attempt, try_number)
            if pipelined
            else self.store.attempt_location(ref, attempt)
        )
        return location, attempt

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
        if attempt is None:
            raise ValueError(f"no attempt id for the S3 output of {ref}")
        if pipelined:
            return self.pipelined.commit_uploaded(
                ref,
                attempt,
                producer=producer,
                compression=compression,
                row_count=rows,
                recorded=self.recorded,
            )
        return self.store.commit_uploaded(
            ref,
            attempt,
            producer=producer,
            compression=compression,
            row_count=rows,
            provenance=provenance,
            recorded=self.recorded,
        )


class DirectS3a(_S3Attempts):
    """Spark reads the manifest's objects and writes the attempt's files on S3 itself (``s3a://``; the
    cluster needs hadoop-aws); the commit checksums what was written and publishes it."""

    name = "direct-s3a"
    access = None  # Spark's s3a connector has its own settings
    credentials = None

    def input_partition(
        self, ref: PartitionRef, result: str, number: int, handle: PipelinedHandle | None
    ) -> InputPartition:
        _, uris = self._objects(ref, handle)
        return InputPartition(ref.partition_id, [uri.replace("s3://", "s3a://", 1) for uri in uris])

    def output_location(
        self, ref: PartitionRef, result: str, *, pipelined: bool, try_number: int
    ) -> tuple[str, str | None]:
        location, attempt = super().output_location(ref, result, pipelined=pipelined, try_number=try_number)
        return location.replace("s3://", "s3a://", 1), attempt


class ExecutorS3(_S3Attempts):
    """Spark's executors read the manifest's objects and write the attempt's objects on S3 themselves
    (``spark/partition_objects.py``): each verifies what it reads and records what it wrote, so the
    commit publishes the executors' record without reading a byte. The worker handles manifests only,
    whatever machines the executors run on."""

    name = "executors"
    recorded = True

    def __init__(
        self, store: S3PartitionStore, access: StoreAccess, credentials: StoreCredentials | None
    ) -> None:
        super().__init__(store)
        self.access = access
        self.credentials = credentials  # None: the executors' own (an instance role)

    def input_partition(
        self, ref: PartitionRef, result: str, number: int, handle: PipelinedHandle | None
    ) -> InputPartition:
        """The manifest's objects, found by one LIST with the sizes and ETags it recorded."""
        manifest, uris = self._objects(ref, handle)
        objects = [
            StoredObject(uri.removeprefix("s3://"), entry.size, entry.checksum)
            for entry, uri in zip(manifest.files, uris, strict=True)
        ]
        return InputPartition(ref.partition_id, uris, objects=objects)


def discard_attempts(store: S3PartitionStore, outputs: Iterable[PlannedWrite], try_number: int) -> None:
    """The attempts a failed application wrote into S3 itself: removed now, not at the next gc."""
    execution = execution_id(try_number)
    for output in outputs:
        if output.attempt is not None:
            store.discard_uploaded(
                output.ref, output.attempt, execution_id=execution if output.pipelined else None
            )


def placement_for(
    path: DataPath,
    store: S3PartitionStore,
    workdir: Path,
    *,
    processed: Collection[str],
    executor_access: Callable[[], tuple[StoreAccess, StoreCredentials | None]],
) -> DataPlacement:
    """The placement of a try whose stage's data path is ``path`` (``model/data_path.py``)."""
    if path is DataPath.EXECUTORS:
        return ExecutorS3(store, *executor_access())
    if path is DataPath.S3A:
        return DirectS3a(store)
    return StagedFiles(store, workdir, processed=processed)
