"""Pipelined partitions: which execution of its producer a consumer reads.

A pipelined partition lives for one execution of its failover region. Its producer commits the data
under the execution's scratch prefix (``<run>/scratch/<execution>/<result>/<map-index>/``, a manifest
as for a blocking partition), then publishes the partition's **handle**,
``<run>/pipelined/<result>/<map-index>.json``, naming that execution. A consumer resolves the handle;
it never guesses an execution, so a mapped producer is found exactly like an unmapped one.

The handle is replaced by compare-and-swap and fenced by the producer's try number, as a manifest is:
a zombie try of an older execution cannot take it back. A handle whose try the run's recovery journal
has seen end (a failure, or a clear by failover) belongs to an execution that no longer exists, and
resolving it raises ``PartitionNotFound`` like a missing one: Flink never re-consumes a pipelined
partition after its region failed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..failover.clock import Clock, SystemClock
from .errors import PartitionNotFound, StaleCommitError, Unavailable
from .manifest import Manifest, Producer
from .naming import PartitionRef

if TYPE_CHECKING:
    from .store import FetchedPartition, S3PartitionStore

HANDLE_VERSION = 1
MAX_HANDLE_BYTES = 16 * 1024


def execution_id(try_number: int) -> str:
    """The execution a producer try writes: one per try, so a re-run never overwrites what was read."""
    return f"t{try_number}"


@dataclass(frozen=True)
class PipelinedHandle:
    """Where the current execution of one pipelined partition is."""

    partition_id: str
    execution: str
    producer: Producer
    published_at: float

    def to_json(self) -> bytes:
        return json.dumps({
            "version": HANDLE_VERSION, "partition_id": self.partition_id, "execution": self.execution,
            "producer": {"task_id": self.producer.task_id, "map_index": self.producer.map_index,
                         "try_number": self.producer.try_number},
            "published_at": self.published_at,
        }, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes, expected: PartitionRef) -> PipelinedHandle:
        """A stored handle, validated; anything else is an invalid one (the next publish replaces it)."""
        try:
            if len(raw) > MAX_HANDLE_BYTES:
                raise ValueError(f"{len(raw)} bytes, more than {MAX_HANDLE_BYTES}")
            doc = json.loads(raw)
            if not isinstance(doc, dict) or doc.get("version") != HANDLE_VERSION:
                raise ValueError(f"unsupported version {doc.get('version') if isinstance(doc, dict) else doc!r}")
            producer = doc["producer"]
            if not isinstance(producer, dict):
                raise ValueError("'producer' must be an object")
            handle = cls(
                partition_id=doc["partition_id"], execution=doc["execution"],
                producer=Producer(producer["task_id"], producer["map_index"], producer["try_number"]),
                published_at=float(doc["published_at"]),
            )
            if handle.partition_id != expected.partition_id:
                raise ValueError(f"it names partition {handle.partition_id!r}")
            if handle.execution != execution_id(handle.producer.try_number):
                raise ValueError(f"execution {handle.execution!r} is not try {handle.producer.try_number}'s")
        except (KeyError, TypeError, ValueError, RecursionError) as err:
            detail = f"{err!r}" if isinstance(err, KeyError) else str(err)
            raise PartitionNotFound(expected.partition_id, Unavailable.INVALID_MANIFEST,
                                    f"invalid pipelined-partition handle: {detail}", run=str(expected.run)) from None
        return handle


class PipelinedPartitions:
    """Commit and resolve the pipelined partitions of a store."""

    def __init__(self, store: S3PartitionStore, *, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock or SystemClock()

    def handle_key(self, ref: PartitionRef) -> str:
        return self.store.layout.pipelined_handle_key(ref)

    # -- producer side ------------------------------------------------------------------------------
    def commit(
        self, ref: PartitionRef, source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *,
        producer: Producer, compression: str = "snappy", row_count: int | None = None,
    ) -> Manifest:
        """Commit files from local disk as the execution of ``producer``'s try, then publish it."""
        execution = execution_id(producer.try_number)
        manifest = self.store.commit_scratch(ref, execution, source, producer=producer, compression=compression,
                                             row_count=row_count)
        self.publish(ref, producer)
        return manifest

    def attempt_location(self, ref: PartitionRef, attempt_id: str, try_number: int) -> str:
        """``s3://`` prefix where a writer that talks to S3 itself puts the files of an attempt."""
        return self.store.attempt_location(ref, attempt_id, execution_id=execution_id(try_number))

    def commit_uploaded(
        self, ref: PartitionRef, attempt_id: str, *, producer: Producer, compression: str = "snappy",
        row_count: int | None = None,
    ) -> Manifest:
        """Commit what a writer put under ``attempt_location``, then publish it."""
        manifest = self.store.commit_uploaded(ref, attempt_id, producer=producer, compression=compression,
                                              row_count=row_count, execution_id=execution_id(producer.try_number))
        self.publish(ref, producer)
        return manifest

    def publish(self, ref: PartitionRef, producer: Producer) -> PipelinedHandle:
        """Make ``producer``'s execution the one consumers read; never replaces a newer try's."""
        handle = PipelinedHandle(ref.partition_id, execution_id(producer.try_number), producer,
                                 round(self.clock.now(), 3))

        def change(current: bytes | None) -> bytes:
            if current is not None:
                try:
                    existing = PipelinedHandle.from_json(current, ref)
                except PartitionNotFound:
                    pass  # an invalid handle is replaced
                else:
                    if existing.producer.try_number > producer.try_number:
                        raise StaleCommitError(ref.partition_id, producer.try_number,
                                               existing.producer.try_number, existing.execution)
            return handle.to_json()

        self.store.json_objects.update_raw(self.handle_key(ref), change)
        return handle

    # -- consumer side ------------------------------------------------------------------------------
    def resolve(self, ref: PartitionRef, *, ended_through: int = 0) -> PipelinedHandle:
        """The current execution of ``ref``. ``ended_through``: the producer's highest try that the
        run's recovery journal saw end (failed, or cleared by failover); a handle of that try or an
        older one belongs to an execution that failover has replaced."""
        raw = self.store.json_objects.get_bytes(self.handle_key(ref), oversized="truncate")
        where = f"s3://{self.store.bucket}/{self.handle_key(ref)}"
        if raw is None:
            raise PartitionNotFound(
                ref.partition_id, Unavailable.MISSING_MANIFEST,
                f"no execution of its region has produced it yet (no {where})", run=str(ref.run))
        handle = PipelinedHandle.from_json(raw.value, ref)
        if handle.producer.try_number <= ended_through:
            raise PartitionNotFound(
                ref.partition_id, Unavailable.PIPELINED,
                f"written by try {handle.producer.try_number} of {handle.producer.task_id}, an execution of "
                f"its region that failover has since restarted ({where})", run=str(ref.run))
        return handle

    def fetch(self, ref: PartitionRef, handle: PipelinedHandle, dest: Any) -> FetchedPartition:
        return self.store.fetch_scratch(ref, handle.execution, dest)

    def remote_files(self, ref: PartitionRef, handle: PipelinedHandle) -> tuple[Manifest, list[str]]:
        return self.store.remote_files(ref, execution_id=handle.execution)
