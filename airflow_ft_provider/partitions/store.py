"""The S3 result-partition store: one object, one mixin per protocol.

- ``commit``: data files under a new attempt, then the manifest in one conditional PUT, fenced by the
  producer's try number (``commit.PartitionCommits``);
- ``fetch``: read through the manifest, every file checked (``fetch.PartitionReads``);
- ``availability``: which partitions can be consumed again (``availability.PartitionAvailability``);
- ``leases`` and ``retention``: who still reads a run, and what may be deleted when
  (``leases.ConsumerLeases``, ``retention.PartitionRetention``);
- ``s3_objects``: the S3 access they share, and the JSON-object API for state kept beside partitions
  (``s3_objects.StoreObjects``).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from ..failover.clock import Clock, SystemClock
from .availability import AvailabilityReport, PartitionAvailability, UnavailablePartition
from .cache import LocalPartitionCache
from .commit import new_attempt_id
from .errors import DEFAULT_CREDENTIALS
from .fetch import FetchedPartition
from .leases import Lease
from .manifest import DEFAULT_CHECKSUM, check_algorithm
from .naming import StoreLayout
from .retention import (
    ALREADY_RELEASED,
    DEFAULT_ORPHAN_GRACE,
    DEFAULT_RETENTION,
    NOT_ENDED,
    RELEASED_MARKER_EXPIRED,
    OrphanReport,
    PartitionRetention,
    ReleaseReport,
    RetentionOutcome,
)
from .reuse import PartitionReuse
from .s3_objects import StepHook, default_transfer_config

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


class S3PartitionStore(PartitionReuse, PartitionAvailability, PartitionRetention):
    """Blocking result partitions on S3 (re-consumable until released) and pipelined scratch output.

    ``client`` is a boto3 S3 client or a zero-argument factory returning one, so the store needs no
    Airflow (``PartitionStoreHook`` builds one from an Airflow connection).
    """

    def __init__(
        self,
        client: Any,
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
        self.layout = StoreLayout.from_url(url)
        self.credentials = credentials  # whose credentials the client uses, named in error hints
        if not isinstance(allow_unconditional_writes, bool):
            raise ValueError(
                f"allow_unconditional_writes must be True or False, got {allow_unconditional_writes!r}"
            )
        # Unsafe: go on when the endpoint ignores If-None-Match / If-Match (see require_conditional_writes).
        self.allow_unconditional_writes = allow_unconditional_writes
        self._client_or_factory = client
        self._client: Any = None
        self._client_lock = threading.Lock()
        if cache is not None and not isinstance(cache, LocalPartitionCache):
            cache = LocalPartitionCache(cache)
        self.cache = cache
        self.checksum = check_algorithm(checksum)
        self.transfer_config = transfer_config or default_transfer_config()
        for name, value in (("retention", retention), ("orphan_grace", orphan_grace)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number of seconds ≥ 0, got {value!r}")
        self.retention = float(retention)
        self.orphan_grace = float(orphan_grace)
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be an integer ≥ 1, got {max_workers!r}")
        self.max_workers = max_workers
        self._clock = clock or SystemClock()
        self._on_step = on_step

    def __repr__(self) -> str:
        return f"S3PartitionStore({self.layout.url!r}, cache={self.cache!r})"
