"""The S3 result-partition store: a façade over one ``StoreObjects`` and one component per protocol.

- ``commit``: data files under a new attempt, then the manifest in one conditional PUT, fenced by the
  producer's try number (``commit.PartitionCommits``);
- ``fetch``: read through the manifest, every file checked (``fetch.PartitionReads``);
- ``availability``: which partitions can be consumed again (``availability.PartitionAvailability``),
  and for people's reads of a whole ended run, its manifests in one object (``manifest_index``);
- ``leases`` and ``retention``: who still reads a run, and what may be deleted when
  (``leases.ConsumerLeases``, ``retention.PartitionRetention``);
- ``s3_objects``: the S3 access they share, and the JSON-object API for state kept beside partitions
  (``s3_objects.StoreObjects``).

Each component holds the one ``StoreObjects`` (and the components it builds on); the store publishes
their operations under its own name, so a caller needs only the store.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..failover.clock import Clock, SystemClock
from .availability import AvailabilityReport, PartitionAvailability, UnavailablePartition
from .cache import LocalPartitionCache
from .commit import PartitionCommits, new_attempt_id
from .conditional import ConditionalJsonStore
from .errors import DEFAULT_CREDENTIALS
from .fetch import FetchedPartition, PartitionReads
from .leases import ConsumerLeases, Lease
from .manifest import DEFAULT_CHECKSUM, check_algorithm
from .manifest_index import ManifestIndexes
from .naming import StoreLayout
from .retention import PartitionRetention
from .reuse import PartitionReuse
from .s3_client import ClientOrFactory, S3Client
from .s3_objects import StepHook, StoreObjects
from .sweep import (
    ALREADY_RELEASED,
    DEFAULT_ORPHAN_GRACE,
    DEFAULT_RETENTION,
    NOT_ENDED,
    RELEASED_MARKER_EXPIRED,
    OrphanReport,
    ReleaseReport,
    RetentionOutcome,
)
from .transfers import default_transfer_config

if TYPE_CHECKING:
    from boto3.s3.transfer import TransferConfig

__all__ = [
    "ALREADY_RELEASED",
    "DEFAULT_ORPHAN_GRACE",
    "DEFAULT_RETENTION",
    "NOT_ENDED",
    "RELEASED_MARKER_EXPIRED",
    "AvailabilityReport",
    "FetchedPartition",
    "Lease",
    "OrphanReport",
    "ReleaseReport",
    "RetentionOutcome",
    "S3PartitionStore",
    "UnavailablePartition",
    "default_transfer_config",
    "new_attempt_id",
]


class S3PartitionStore:
    """Blocking result partitions on S3 (re-consumable until released) and pipelined scratch output.

    ``client`` is a boto3 S3 client or a zero-argument factory returning one, so the store needs no
    Airflow (``PartitionStoreHook`` builds one from an Airflow connection).
    """

    def __init__(
        self,
        client: ClientOrFactory,
        url: str,
        *,
        cache: LocalPartitionCache | str | os.PathLike[str] | None = None,
        checksum: str = DEFAULT_CHECKSUM,
        transfer_config: TransferConfig | None = None,
        retention: float = DEFAULT_RETENTION,
        orphan_grace: float = DEFAULT_ORPHAN_GRACE,
        clock: Clock | None = None,
        on_step: StepHook | None = None,
        max_workers: int = 8,
        credentials: str = DEFAULT_CREDENTIALS,
        allow_unconditional_writes: bool = False,
    ) -> None:
        if cache is not None and not isinstance(cache, LocalPartitionCache):
            cache = LocalPartitionCache(cache)
        objects = StoreObjects(
            client,
            StoreLayout.from_url(url),
            cache=cache,
            checksum=check_algorithm(checksum),
            transfer_config=transfer_config or default_transfer_config(),
            clock=clock or SystemClock(),
            on_step=on_step,
            max_workers=max_workers,
            credentials=credentials,
            allow_unconditional_writes=allow_unconditional_writes,
        )
        self.objects = objects
        self.commits = PartitionCommits(objects)
        self.reads = PartitionReads(objects)
        self.reuse = PartitionReuse(objects, self.commits, self.reads)
        self.availability = PartitionAvailability(objects)
        self.indexes = ManifestIndexes(objects)
        self.leases = ConsumerLeases(objects)
        self.releases = PartitionRetention(
            objects, self.leases, retention=retention, orphan_grace=orphan_grace
        )
        # The store's settings and shared S3 access, as callers read them.
        self.layout, self.cache, self.checksum = objects.layout, objects.cache, objects.checksum
        self.credentials, self.max_workers = objects.credentials, objects.max_workers
        self.transfer_config = objects.transfer_config
        self.allow_unconditional_writes = objects.allow_unconditional_writes
        self.retention, self.orphan_grace = self.releases.retention, self.releases.orphan_grace
        # Its operations, one name per protocol's operation (each documented where it is defined).
        self.check_connection, self.require_conditional_writes = (
            objects.check_connection,
            objects.require_conditional_writes,
        )
        self.conditional_objects, self.manifest, self.runs = (
            objects.conditional_objects,
            objects.manifest,
            objects.runs,
        )
        self.write_object, self.read_object, self.delete_keys = (
            objects.write_object,
            objects.read_object,
            objects.delete_keys,
        )
        self.upload_file, self.download_file = objects.upload_file, objects.download_file
        self.list_objects, self.modified_times = objects.list_objects, objects.modified_times
        self.commit, self.commit_uploaded = self.commits.commit, self.commits.commit_uploaded
        self.attempt_location, self.discard_uploaded = (
            self.commits.attempt_location,
            self.commits.discard_uploaded,
        )
        self.recorded_rows = self.commits.recorded_rows
        self.fetch, self.remote_files = self.reads.fetch, self.reads.remote_files
        self.reuse_output, self.copy_output = self.reuse.reuse_output, self.reuse.copy_output
        self.earlier_run_outputs = self.reuse.earlier_run_outputs
        self.check_availability, self.check_graph = (
            self.availability.check_availability,
            self.availability.check_graph,
        )
        self.register_consumer, self.unregister_consumer, self.consumers = (
            self.leases.register_consumer,
            self.leases.unregister_consumer,
            self.leases.consumers,
        )
        self.release_run, self.release_scratch = self.releases.release_run, self.releases.release_scratch
        self.mark_run_ended, self.pipelines = self.releases.mark_run_ended, self.releases.pipelines
        self.release_expired_runs, self.sweep_expired_runs = (
            self.releases.release_expired_runs,
            self.releases.sweep_expired_runs,
        )
        self.cleanup_orphans = self.releases.cleanup_orphans
        self.write_manifest_index = self.indexes.write

    @property
    def bucket(self) -> str:
        return self.objects.bucket

    @property
    def client(self) -> S3Client:
        return self.objects.client

    @property
    def json_objects(self) -> ConditionalJsonStore:
        """The compare-and-swap primitive on this store's bucket, for state kept beside partitions."""
        return self.objects.json_objects

    def __repr__(self) -> str:
        return f"S3PartitionStore({self.layout.url!r}, cache={self.cache!r})"
