"""Pipelined partitions: which execution of its producer a consumer reads.

A pipelined partition lives for one execution of its failover region. Its producer puts the data
either under the execution's scratch prefix (``<run>/scratch/<execution>/<result>/<map-index>/``,
committed with a manifest as a blocking partition is) or, on a Spark Connect server, in a cached global
temporary view; then it publishes the partition's **handle**, ``<run>/pipelined/<result>/<map-index>.json``,
naming that execution and, for a view, the server and the view. A consumer resolves the handle; it
never guesses an execution, so a mapped producer is found exactly like an unmapped one. Consumers
record on the handle that they are done, and the last one releases a view's data.

The handle is replaced by compare-and-swap and fenced by the producer's try number, as a manifest is:
a zombie try of an older execution cannot take it back. A handle whose try the run's recovery journal
has seen end (a failure, or a clear by failover) belongs to an execution that no longer exists, and
resolving it raises ``PartitionNotFound`` like a missing one: Flink never re-consumes a pipelined
partition after its region failed.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..failover.clock import Clock, SystemClock
from .errors import PartitionNotFound, StaleCommitError, Unavailable
from .manifest import Manifest, Producer
from .naming import PartitionRef, RunRef
from .pipelined_handle import EngineLocation, PipelinedHandle, execution_id, execution_try
from .upload import StoredCopy

if TYPE_CHECKING:
    from .store import FetchedPartition, S3PartitionStore


@dataclass(frozen=True)
class RunEndRelease:
    """What the end of a run freed of its pipelined partitions."""

    views: tuple[EngineLocation, ...] = ()  # handed to drop_views
    scratch_objects: int = 0  # S3 scratch objects deleted
    kept: tuple[str, ...] = ()  # partitions an execution published after the run ended (it was cleared)


class PipelinedPartitions:
    """Commit and resolve the pipelined partitions of a store."""

    def __init__(self, store: S3PartitionStore, *, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock or SystemClock()

    def handle_key(self, ref: PartitionRef) -> str:
        return self.store.layout.pipelined_handle_key(ref)

    # -- producer side ------------------------------------------------------------------------------
    def commit(
        self,
        ref: PartitionRef,
        source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        *,
        producer: Producer,
        compression: str = "snappy",
        row_count: int | None = None,
        copy_from: Mapping[Path, StoredCopy] | None = None,
    ) -> Manifest:
        """Commit files from local disk (``copy_from``: see ``commit``) as the execution of ``producer``'s
        try, then publish it."""
        execution = execution_id(producer.try_number)
        manifest = self.store.commit(
            ref,
            source,
            producer=producer,
            compression=compression,
            row_count=row_count,
            execution_id=execution,
            copy_from=copy_from,
        )
        self.publish(ref, producer)
        return manifest

    def attempt_location(self, ref: PartitionRef, attempt_id: str, try_number: int) -> str:
        """``s3://`` prefix where a writer that talks to S3 itself puts the files of an attempt."""
        return self.store.attempt_location(ref, attempt_id, execution_id=execution_id(try_number))

    def commit_uploaded(
        self,
        ref: PartitionRef,
        attempt_id: str,
        *,
        producer: Producer,
        compression: str = "snappy",
        row_count: int | None = None,
        recorded: bool = False,
    ) -> Manifest:
        """Commit what a writer put under ``attempt_location`` (see the store's), then publish it."""
        manifest = self.store.commit_uploaded(
            ref,
            attempt_id,
            producer=producer,
            compression=compression,
            row_count=row_count,
            execution_id=execution_id(producer.try_number),
            recorded=recorded,
        )
        self.publish(ref, producer)
        return manifest

    def publish(
        self,
        ref: PartitionRef,
        producer: Producer,
        *,
        engine: EngineLocation | None = None,
        rows: int | None = None,
    ) -> PipelinedHandle:
        """Make ``producer``'s execution the one consumers read; never replaces a newer try's."""
        handle = PipelinedHandle(
            ref.partition_id,
            execution_id(producer.try_number),
            producer,
            round(self.clock.now(), 3),
            engine,
            rows=rows,
        )

        def change(current: bytes | None) -> bytes:
            if current is not None:
                try:
                    existing = PipelinedHandle.from_json(current, ref)
                except PartitionNotFound:
                    pass  # an invalid handle is replaced
                else:
                    if existing.producer.try_number > producer.try_number:
                        raise StaleCommitError(
                            ref.partition_id,
                            producer.try_number,
                            existing.producer.try_number,
                            existing.execution,
                        )
            return handle.to_json()

        self.store.json_objects.update_raw(self.handle_key(ref), change)
        return handle

    # -- consumer side ------------------------------------------------------------------------------
    def current(self, ref: PartitionRef) -> PipelinedHandle | None:
        """The handle as stored (None: never published); invalid ones raise PartitionNotFound."""
        raw = self.store.json_objects.get_bytes(self.handle_key(ref), oversized="truncate")
        return None if raw is None else PipelinedHandle.from_json(raw.value, ref)

    def resolve(self, ref: PartitionRef, *, ended_through: int = 0) -> PipelinedHandle:
        """The current execution of ``ref``. ``ended_through``: the producer's highest try that the
        run's recovery journal saw end (failed, or cleared by failover); a handle of that try or an
        older one belongs to an execution that failover has replaced."""
        handle = self.current(ref)
        where = f"s3://{self.store.bucket}/{self.handle_key(ref)}"
        if handle is None:
            raise PartitionNotFound(
                ref.partition_id,
                Unavailable.MISSING_MANIFEST,
                f"no execution of its region has produced it yet (no {where})",
                run=str(ref.run),
            )
        if handle.producer.try_number <= ended_through:
            raise PartitionNotFound(
                ref.partition_id,
                Unavailable.PIPELINED,
                f"written by try {handle.producer.try_number} of {handle.producer.task_id}, an execution of "
                f"its region that failover has since restarted ({where})",
                run=str(ref.run),
            )
        return handle

    def record_consumer(
        self, ref: PartitionRef, handle: PipelinedHandle, consumer: str, consumers: Iterable[str]
    ) -> bool:
        """Note that ``consumer`` has committed what it read from ``handle``'s execution; True when
        that makes every one of ``consumers`` done, so the data can be released (Flink releases a
        pipelined partition once it is fully consumed). A newer execution meanwhile: False."""
        expected = set(consumers)
        complete = False

        def change(current: bytes | None) -> bytes | None:
            nonlocal complete
            complete = False
            if current is None:
                return None
            stored = PipelinedHandle.from_json(current, ref)
            if stored.execution != handle.execution or consumer in stored.consumed_by:
                return None
            consumed = tuple(sorted({*stored.consumed_by, consumer}))
            complete = expected <= set(consumed)
            return dataclasses.replace(stored, consumed_by=consumed).to_json()

        self.store.json_objects.update_raw(self.handle_key(ref), change)
        return complete

    def fetch(self, ref: PartitionRef, handle: PipelinedHandle, dest: Any) -> FetchedPartition:
        return self.store.fetch(ref, dest, execution_id=handle.execution)

    def remote_files(self, ref: PartitionRef, handle: PipelinedHandle) -> tuple[Manifest, list[str]]:
        return self.store.remote_files(ref, execution_id=handle.execution)

    # -- end of the run -----------------------------------------------------------------------------
    def release_run(
        self,
        run: RunRef,
        partitions: Iterable[PartitionRef],
        *,
        ended_at: float,
        drop_views: Callable[[list[PipelinedHandle]], None],
    ) -> RunEndRelease:
        """Free the pipelined data of a run that ended at ``ended_at``: nothing reads it again (Flink
        releases a job's pipelined partitions when the job ends; a consumer cleared later gets
        ``PartitionNotFound`` and failover re-runs the producing region, as for a lost partition).

        ``partitions``: every pipelined partition of the run (the pipeline knows them; no key in the
        bucket is trusted to name one). A handle published after ``ended_at`` belongs to an execution
        started by a clear of the finished run: it and its scratch data are left to that execution.
        Scratch data no handle names is removed once it is older than ``ended_at`` (a try that died
        between commit and publish); the handles stay, so try-number fencing still holds.
        """
        refs = {(ref.result, ref.map_index): ref for ref in partitions}
        in_engine: list[PipelinedHandle] = []
        kept: list[str] = []
        current: dict[tuple[str, int], int] = {}  # partition -> try of the handle ended with the run
        for key, ref in refs.items():
            try:
                handle = self.current(ref)
            except PartitionNotFound:
                handle = None  # invalid: it names nothing that can be released
            if handle is None:
                continue
            if handle.published_at > ended_at:
                kept.append(ref.partition_id)
                continue
            current[key] = handle.producer.try_number
            if handle.engine is not None:
                in_engine.append(handle)
        if in_engine:
            drop_views(in_engine)
        scratch = self._release_scratch(run, refs, current, set(kept), ended_at)
        return RunEndRelease(tuple(h.engine for h in in_engine if h.engine is not None), scratch, tuple(kept))

    def _release_scratch(
        self,
        run: RunRef,
        refs: dict[tuple[str, int], PartitionRef],
        current: dict[tuple[str, int], int],
        kept: set[str],
        ended_at: float,
    ) -> int:
        root = self.store.layout.scratch_run_prefix(run)
        groups: dict[tuple[str, str, str], list[tuple[str, float]]] = {}
        for key, modified in self.store.modified_times(root).items():
            parts = key[len(root) :].split("/", 3)
            if len(parts) == 4:
                groups.setdefault((parts[0], parts[1], parts[2]), []).append((key, modified))
        doomed: list[str] = []
        for (execution, result, index), objects in groups.items():
            try_number = execution_try(execution)
            ref = refs.get((result, int(index))) if index.lstrip("-").isdigit() else None
            if try_number is None or ref is None or ref.partition_id in kept:
                continue  # not a pipelined partition of this pipeline, or a live execution's
            superseded = try_number <= current.get((result, ref.map_index), 0)
            if superseded or max(modified for _, modified in objects) <= ended_at:
                doomed.extend(key for key, _ in objects)
        return self.store.delete_keys(doomed) if doomed else 0
