"""Which partitions of a run can be consumed again, and why the others cannot (feeds the failover rules)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..spark.checksums import new_hasher
from .errors import (
    PartitionNotFound,
    Unavailable,
)
from .manifest import (
    Manifest,
)
from .manifest_cache import MANIFESTS, ManifestKey, store_name
from .manifest_index import ManifestIndex, ManifestIndexes
from .naming import (
    PartitionRef,
    RunRef,
)
from .s3_objects import ObjectInfo, StoreObjects
from .transfers import MiB

if TYPE_CHECKING:
    from ..failover.graph import StageGraph

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnavailablePartition:
    partition_id: str
    reason: Unavailable
    detail: str = ""

    @property
    def explanation(self) -> str:
        """Why, in words: the reason and, when there is one, its detail."""
        return f"{self.reason}: {self.detail}" if self.detail else str(self.reason)

    def error(self, run: RunRef | None = None) -> PartitionNotFound:
        return PartitionNotFound(self.partition_id, self.reason, self.detail, run=str(run or ""))


@dataclass(frozen=True)
class AvailabilityReport:
    """Which partitions can be consumed again; ``unavailable_ids`` feeds the failover strategy."""

    run: RunRef
    available: frozenset[str]
    unavailable: Mapping[str, UnavailablePartition]
    manifests: Mapping[str, Manifest] = field(default_factory=dict)  # every manifest that was read
    # With a time budget: manifests listed but not read in it (neither available nor unavailable yet)
    pending: frozenset[str] = frozenset()

    @property
    def unavailable_ids(self) -> set[str]:
        return set(self.unavailable)


_BACKGROUND: ThreadPoolExecutor | None = None  # reads that outlive a budget (they fill the manifest cache)
_BACKGROUND_LOCK = threading.Lock()


def _background(workers: int) -> ThreadPoolExecutor:
    global _BACKGROUND
    with _BACKGROUND_LOCK:
        if _BACKGROUND is None:
            _BACKGROUND = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ft-check-later")
        return _BACKGROUND


class PartitionAvailability:
    """Availability protocol: one listing plus one GET per manifest, ``deep`` reads every byte."""

    def __init__(self, objects: StoreObjects) -> None:
        self.objects = objects

    def check_availability(
        self,
        pipeline: str,
        run_id: str,
        partitions: Iterable[str | PartitionRef],
        *,
        pipelined: Iterable[str | PartitionRef] = (),
        deep: bool = False,
        budget: float | None = None,
        index: bool = False,
    ) -> AvailabilityReport:
        """Which of a run's partitions can be consumed again, and why the others cannot.

        One paginated listing of the run's blocking prefix plus one GET per manifest (in parallel),
        not a HEAD per object. ``pipelined`` partitions are always unavailable. ``deep`` also reads
        every object back and checks its checksum. ``budget`` (seconds, for a page a person waits
        for; never for a failover decision): the manifests not read by then are ``pending``, and their
        reads go on in the background, so that the process's manifest cache answers the next check.
        ``index`` (for people's reads of a whole run, not for failover decisions): first read the run's
        manifest index (``manifest_index.py``), one GET, when some listed manifest is not in memory.
        """
        run = RunRef(pipeline, run_id)
        refs = [run.parse(p) for p in partitions]
        unavailable: dict[str, UnavailablePartition] = {}
        for p in pipelined:
            pid = run.parse(p).partition_id
            unavailable[pid] = UnavailablePartition(
                pid, Unavailable.PIPELINED, "pipelined partitions are not kept after a failure"
            )
        listing = self.objects.list_under(self.objects.layout.blocking_prefix(run)) if refs else {}
        manifests: dict[str, Manifest] = {}
        known = self._index(run, refs, listing) if index else None

        def check(ref: PartitionRef) -> UnavailablePartition | None:
            loc = self.objects.blocking(ref)
            listed = listing.get(loc.manifest_key)
            if listed is None:
                return UnavailablePartition(ref.partition_id, Unavailable.MISSING_MANIFEST)
            try:
                manifest = self.objects.read_manifest(loc, listed.etag, known)
            except PartitionNotFound as exc:
                return UnavailablePartition(ref.partition_id, exc.reason, exc.detail)
            manifests[ref.partition_id] = manifest
            for entry in manifest.files:
                key = loc.prefix + entry.key
                info = listing.get(key) or self.objects.head(key)  # a HEAD only if written after the listing
                if info is None:
                    return UnavailablePartition(
                        ref.partition_id, Unavailable.MISSING_OBJECT, f"{entry.key} is gone"
                    )
                if info.size != entry.size:
                    return UnavailablePartition(
                        ref.partition_id,
                        Unavailable.SIZE_MISMATCH,
                        f"{entry.key} is {info.size} bytes, manifest says {entry.size}",
                    )
            if deep:
                for entry in manifest.files:
                    actual = self._remote_checksum(loc.prefix + entry.key, entry.checksum)
                    if actual is None:
                        return UnavailablePartition(
                            ref.partition_id, Unavailable.MISSING_OBJECT, f"{entry.key} is gone"
                        )
                    if actual != entry.checksum:
                        return UnavailablePartition(
                            ref.partition_id,
                            Unavailable.CHECKSUM_MISMATCH,
                            f"{entry.key} has {actual}, manifest says {entry.checksum}",
                        )
            return None

        # What needs no request is checked in this thread: handing 1,000 of those to a pool costs more
        # in GIL hand-offs (0.4 s) than the checks themselves; the pool is for the GETs.
        here, remote = ([], refs) if deep else self._split(refs, listing, known)
        for ref in here:
            if (problem := check(ref)) is not None:
                unavailable[ref.partition_id] = problem
        if budget is not None:  # what the listing alone says is said at once
            listed = [ref for ref in remote if self.objects.blocking(ref).manifest_key in listing]
            for ref in remote:
                if ref not in listed:
                    unavailable[ref.partition_id] = UnavailablePartition(
                        ref.partition_id, Unavailable.MISSING_MANIFEST
                    )
            return self._within(budget, run, refs, listed, check, unavailable, manifests)
        with ThreadPoolExecutor(max_workers=self.objects.max_workers, thread_name_prefix="ft-check") as pool:
            for ref, problem in zip(remote, pool.map(check, remote), strict=True):
                if problem is not None:
                    unavailable[ref.partition_id] = problem
        available = frozenset(ref.partition_id for ref in refs) - set(unavailable)
        return AvailabilityReport(run, available, unavailable, manifests)

    def _index(
        self, run: RunRef, refs: list[PartitionRef], listing: Mapping[str, ObjectInfo]
    ) -> ManifestIndex | None:
        """The run's manifest index, unless no listed manifest could come from it (all in memory
        already, as on a reload, or an endpoint that lists no ETags)."""
        if any(etag is not None and not MANIFESTS.holds(key) for etag, key in self._listed(refs, listing)):
            return ManifestIndexes(self.objects).read(run)
        return None

    def _listed(
        self, refs: list[PartitionRef], listing: Mapping[str, ObjectInfo]
    ) -> Iterator[tuple[str | None, ManifestKey]]:
        """Each listed manifest's ETag (None: the endpoint sent none) and its key in the manifest cache."""
        store = store_name(self.objects.client, self.objects.bucket)
        for ref in refs:
            key = self.objects.blocking(ref).manifest_key
            if (listed := listing.get(key)) is not None:
                yield listed.etag, ManifestKey(store, key, listed.etag or "")

    def _split(
        self, refs: list[PartitionRef], listing: Mapping[str, ObjectInfo], known: ManifestIndex | None
    ) -> tuple[list[PartitionRef], list[PartitionRef]]:
        """The partitions whose check needs no GET (not listed, their manifest in memory or in the
        index as the listed object), and the others."""
        store = store_name(self.objects.client, self.objects.bucket)
        here: list[PartitionRef] = []
        remote: list[PartitionRef] = []
        for ref in refs:
            key = self.objects.blocking(ref).manifest_key
            listed = listing.get(key)
            answered = listed is None or (
                listed.etag is not None
                and (
                    MANIFESTS.holds(ManifestKey(store, key, listed.etag))
                    or (known is not None and known.raw(key, listed.etag) is not None)
                )
            )
            (here if answered else remote).append(ref)
        return here, remote

    def _within(
        self,
        budget: float,
        run: RunRef,
        every: list[PartitionRef],
        refs: list[PartitionRef],
        check: Callable[[PartitionRef], UnavailablePartition | None],
        unavailable: dict[str, UnavailablePartition],
        manifests: dict[str, Manifest],
    ) -> AvailabilityReport:
        """``refs`` checked in the background for at most ``budget`` s; the rest of ``every`` is done."""
        pool = _background(self.objects.max_workers)
        futures: dict[str, Future[UnavailablePartition | None]] = {
            ref.partition_id: pool.submit(check, ref) for ref in refs
        }
        done, _ = wait(futures.values(), timeout=budget)
        pending = frozenset(pid for pid, future in futures.items() if future not in done)
        for pid, future in futures.items():
            if future in done and (problem := future.result()) is not None:
                unavailable[pid] = problem
        available = frozenset(ref.partition_id for ref in every) - set(unavailable) - pending
        read = {pid: m for pid, m in dict(manifests).items() if pid not in pending}
        return AvailabilityReport(run, available, unavailable, read, pending)

    def check_graph(
        self,
        graph: StageGraph,
        pipeline: str,
        run_id: str,
        *,
        deep: bool = False,
        budget: float | None = None,
        index: bool = False,
    ) -> AvailabilityReport:
        """Availability of every partition of a pipeline graph (its pipelined results are unavailable)."""
        blocking: list[str] = []
        pipelined: list[str] = []
        for result in graph.results.values():
            (blocking if result.result_type.is_reconsumable else pipelined).extend(
                graph.partition_ids(result.name)
            )
        return self.check_availability(
            pipeline, run_id, blocking, pipelined=pipelined, deep=deep, budget=budget, index=index
        )

    def _remote_checksum(self, key: str, expected: str) -> str | None:
        hasher = new_hasher(expected)
        with self.objects.s3_errors("GetObject", key):
            body = self.objects.open_object(key)
            if body is None:
                return None
            with body:
                for chunk in body.iter_chunks(MiB):
                    hasher.update(chunk)
        return f"{expected.partition(':')[0]}:{hasher.hexdigest()}"
