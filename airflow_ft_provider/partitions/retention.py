"""The partition life cycle: release of runs (explicit, after retention), scratch release, orphan clean-up."""

from __future__ import annotations

import logging
import reprlib
from collections.abc import Callable, Iterable

from ..safe_json import is_finite_number, load_json
from .deletion import abort_uploads
from .errors import (
    ReleaseRefused,
)
from .leases import MAX_MARKER_BYTES, ConsumerLeases, _finite
from .manifest import (
    InvalidManifest,
    Manifest,
)
from .naming import (
    ATTEMPTS_DIR,
    MANIFEST_NAME,
    PartitionRef,
    RunRef,
    check_name,
)
from .s3_objects import StoreObjects
from .sweep import (
    ALREADY_RELEASED,
    NOT_ENDED,
    RELEASED_MARKER_EXPIRED,
    SWEEP_MARKER,
    OrphanReport,
    ReleaseReport,
    RetentionOutcome,
    RunStates,
    SweepLimits,
    SweepReport,
)

log = logging.getLogger(__name__)


class PartitionRetention:
    """Retention protocol: what may be deleted, and when; never what a lease or a manifest still needs."""

    def __init__(
        self, objects: StoreObjects, leases: ConsumerLeases, *, retention: float, orphan_grace: float
    ) -> None:
        for name, value in (("retention", retention), ("orphan_grace", orphan_grace)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number of seconds ≥ 0, got {value!r}")
        self.objects = objects
        self.leases = leases
        self.retention = float(retention)
        self.orphan_grace = float(orphan_grace)

    def release_run(
        self,
        pipeline: str,
        run_id: str,
        *,
        partitions: Iterable[str | PartitionRef] | None = None,
        reason: str = "explicit request",
    ) -> ReleaseReport:
        """Delete a run's partitions (all, or the blocking ones named) unless a consumer still needs them.

        Raises ReleaseRefused, deleting nothing, while an active lease covers any of them.
        """
        run = RunRef(pipeline, run_id)
        pids = None if partitions is None else tuple(sorted({run.parse(p).partition_id for p in partitions}))
        self.leases._refuse_if_leased(run, pids)
        marker = self.objects.layout.marker_key(run, "releasing")
        self.objects.put_json(
            marker,
            {
                "partitions": None if pids is None else list(pids),
                "at": self.objects.clock.now(),
                "reason": reason,
            },
        )
        try:
            self.leases._refuse_if_leased(run, pids)
        except ReleaseRefused:
            self.objects.delete_batch([marker])
            raise
        run_prefix = self.objects.layout.run_prefix(run)
        if pids is None:
            keys = [k for k in self.objects.list_under(run_prefix) if k != marker]
            abort_uploads(self.objects, run_prefix, older_than=None)
        else:
            keys = [
                k
                for pid in pids
                for k in self.objects.list_under(self.objects.layout.partition_prefix(run.parse(pid)))
            ]
        self.objects.delete_batch(keys)
        if pids is None:
            self.objects.put_json(
                self.objects.layout.marker_key(run, "released"),
                {"at": self.objects.clock.now(), "reason": reason},
            )
        self.objects.delete_batch([marker])
        if self.objects.cache is not None:
            if pids is None:
                self.objects.cache.evict(self.objects.bucket, run_prefix)
            else:
                for pid in pids:
                    self.objects.cache.evict(
                        self.objects.bucket, self.objects.layout.partition_prefix(run.parse(pid))
                    )
        log.info(
            "released %s of run %s (%d objects): %s",
            "all partitions" if pids is None else list(pids),
            run,
            len(keys),
            reason,
        )
        return ReleaseReport(run, pids, len(keys), reason)

    def pipelines(self) -> list[str]:
        """The pipelines (DAG ids) that have data in this store; folders that are not valid names are
        not ours."""
        names = []
        for prefix in self.objects.list_prefixes(self.objects.layout.prefix):
            name = prefix[len(self.objects.layout.prefix) :].rstrip("/")
            try:
                names.append(check_name("pipeline (DAG id)", name))
            except ValueError:
                continue
        return names

    def release_scratch(self, pipeline: str, run_id: str, execution_id: str) -> int:
        """Delete the pipelined partitions of one region execution (they are never read again)."""
        keys = list(
            self.objects.list_under(
                self.objects.layout.scratch_execution_prefix(RunRef(pipeline, run_id), execution_id)
            )
        )
        self.objects.delete_batch(keys)
        return len(keys)

    def mark_run_ended(self, pipeline: str, run_id: str, *, succeeded: bool, at: float | None = None) -> None:
        """Start the retention clock of a finished run, succeeded or failed (``release_expired_runs``
        acts on it). A run that is cleared and ends again is marked again. The marker keeps this store's
        retention (a pipeline's own, when it sets one), so any later sweep or ``gc`` honours it."""
        run = RunRef(pipeline, run_id)
        at = self.objects.clock.now() if at is None else at
        self.objects.put_json(
            self.objects.layout.marker_key(run, "ended"),
            {"at": at, "succeeded": succeeded, "retention": self.retention},
        )

    def release_expired_runs(
        self, pipeline: str, *, states: RunStates | None = None, limit: int | None = None
    ) -> list[RetentionOutcome]:
        """Release each ended run of a pipeline whose retention has passed (at most ``limit``); skip the
        others, saying why. One outcome per run with data in the store.

        A run has ended when its end marker says so or ``states`` (the orchestrator) does; the later of
        the two ends counts. A run ``states`` reports active (cleared after it ended) is never released.
        """
        outcomes = []
        now = self.objects.clock.now()
        released = 0
        for run in self.objects.runs(pipeline):
            markers = {
                k.rsplit("/", 1)[-1]: k
                for k in self.objects.list_under(self.objects.layout.run_prefix(run) + "_run/")
            }
            if "released.json" in markers:
                outcomes.append(self._expire_released_marker(run, markers["released.json"], now))
                continue
            if states is not None and run.run_id in states.active:
                outcomes.append(RetentionOutcome(run, False, "running again (cleared after it ended)"))
                continue
            # ``succeeded.json``: the end marker of stores written before failed runs were marked too
            marker = markers.get("ended.json") or markers.get("succeeded.json")
            try:
                at, recorded = (None, None) if marker is None else self._end_marker(marker)
            except ValueError as exc:
                # One damaged marker must neither release its run early nor stop the sweep.
                outcomes.append(RetentionOutcome(run, False, str(exc)))
                continue
            ends = [] if marker is None else [now if at is None else at]  # None: gone since the LIST
            if states is not None and run.run_id in states.ended_at:
                ends.append(states.ended_at[run.run_id])
            if not ends:
                outcomes.append(RetentionOutcome(run, False, NOT_ENDED))
                continue
            left = max(ends) + (self.retention if recorded is None else recorded) - now
            if left > 0:
                outcomes.append(RetentionOutcome(run, False, f"retention not over ({left:.0f} s left)"))
                continue
            if limit is not None and released >= limit:
                outcomes.append(RetentionOutcome(run, False, f"left to the next sweep ({limit} a sweep)"))
                continue
            released += 1
            try:
                self.release_run(pipeline, run.run_id, reason=f"retention of {self.retention:.0f} s passed")
            except ReleaseRefused as exc:
                outcomes.append(RetentionOutcome(run, False, str(exc)))
            else:
                outcomes.append(RetentionOutcome(run, True, "retention passed"))
        return outcomes

    def sweep_expired_runs(
        self,
        pipeline: str,
        *,
        states: Callable[[], RunStates | None] | None = None,
        limits: SweepLimits | None = None,
    ) -> SweepReport | None:
        """Release the pipeline's expired runs (``partitions/sweep.py``), at most ``limits.max_releases``,
        unless it was swept less than ``limits.every`` ago (then None). ``states`` is asked (the
        orchestrator's view, None if it has none) only when the sweep runs."""
        limits = limits or SweepLimits()
        key = self.objects.layout.pipeline_prefix(pipeline) + SWEEP_MARKER
        now = self.objects.clock.now()
        try:
            last = self._marker_time(key)
        except ValueError:
            last = None  # a damaged marker: sweeping now is safe, and rewrites it
        if last is not None and 0 <= now - last < limits.every:
            return None
        # Claimed before the work, so concurrent run ends of one pipeline do not all sweep (two that read
        # the marker at the same moment may; releasing a run twice is harmless).
        self.objects.put_json(key, {"at": now})
        seen = states() if states is not None else None
        report = SweepReport(
            pipeline, tuple(self.release_expired_runs(pipeline, states=seen, limit=limits.max_releases))
        )
        log.info("%s", report.summary())
        return report

    def _expire_released_marker(self, run: RunRef, key: str, now: float) -> RetentionOutcome:
        """A released run keeps its marker, which refuses consumers that would still register on it,
        for one more retention period; then the marker goes too, so that runs long released stop
        costing every sweep a LIST (the run prefix is then empty). A damaged marker is kept."""
        try:
            released_at = self._marker_time(key)
        except ValueError:
            return RetentionOutcome(run, False, ALREADY_RELEASED)
        if released_at is None or now - released_at < self.retention:
            return RetentionOutcome(run, False, ALREADY_RELEASED)
        self.objects.delete_batch([key])
        log.info("removed the release marker of run %s (released %.0f s ago)", run, now - released_at)
        return RetentionOutcome(run, False, RELEASED_MARKER_EXPIRED)

    def _marker_time(self, key: str) -> float | None:
        """The ``at`` of a life-cycle marker (None if it is gone); ValueError naming the key if invalid."""
        return self._end_marker(key)[0]

    def _end_marker(self, key: str) -> tuple[float | None, float | None]:
        """``at`` and the recorded ``retention`` (None: the store's) of a marker, read once; (None, None)
        if it is gone; ValueError naming the key if invalid."""
        raw = self.objects.json_objects.get_bytes(key, oversized="truncate")
        if raw is None:
            return None, None
        try:
            doc = load_json(raw.value, max_bytes=MAX_MARKER_BYTES)
            if not isinstance(doc, dict):
                raise ValueError(f"expected an object, got {type(doc).__name__}")
            retention = doc.get("retention")
            if retention is not None and not (is_finite_number(retention) and retention >= 0):
                raise ValueError(f"'retention' must be seconds >= 0, got {reprlib.repr(retention)}")
            return _finite(doc.get("at"), "at"), None if retention is None else float(retention)
        except ValueError as exc:
            raise ValueError(
                f"run marker s3://{self.objects.bucket}/{key} is invalid ({exc}); not releasing the run: "
                'write {"at": <seconds since the epoch>} there, or delete it and mark the run ended again'
            ) from None

    def cleanup_orphans(self, pipeline: str, run_id: str, *, grace: float | None = None) -> OrphanReport:
        """Delete attempt data that no manifest references (crashed, fenced or superseded commits).

        Only attempts whose newest object is older than ``grace`` (default ``orphan_grace``) go, so an
        in-flight commit and readers of a just-replaced manifest are left alone. Also aborts stale
        multipart uploads of killed commits.
        """
        run = RunRef(pipeline, run_id)
        grace = self.orphan_grace if grace is None else grace
        cutoff = self.objects.clock.now() - grace
        run_prefix = self.objects.layout.run_prefix(run)
        # partition prefix -> {attempt id -> (keys, newest mtime)}; and partition prefixes with a manifest
        attempts: dict[str, dict[str, tuple[list[str], float]]] = {}
        manifests: set[str] = set()
        for key, info in self.objects.list_under(run_prefix).items():
            rest = key[len(run_prefix) :]
            parts = rest.split("/")
            if parts[0] == "blocking" and len(parts) >= 4:
                base = 4
            elif parts[0] == "scratch" and len(parts) >= 5:
                base = 5
            else:
                continue
            partition_prefix = run_prefix + "/".join(parts[: base - 1]) + "/"
            tail = parts[base - 1 :]
            if tail == [MANIFEST_NAME]:
                manifests.add(partition_prefix)
            elif len(tail) >= 3 and tail[0] == ATTEMPTS_DIR:
                keys, newest = attempts.setdefault(partition_prefix, {}).get(tail[1], ([], 0.0))
                keys.append(key)
                attempts[partition_prefix][tail[1]] = (keys, max(newest, info.last_modified))
        doomed: list[str] = []
        kept: list[str] = []
        for partition_prefix, by_attempt in attempts.items():
            current = self._current_attempt(partition_prefix) if partition_prefix in manifests else None
            for attempt_id, (keys, newest) in by_attempt.items():
                if attempt_id == current:
                    continue
                if newest <= cutoff:
                    doomed.extend(keys)
                else:
                    kept.append(f"{partition_prefix}{ATTEMPTS_DIR}/{attempt_id}/")
        self.objects.delete_batch(doomed)
        # An upload into an attempt that is still in flight belongs to that commit (S3's Initiated
        # time alone would do, but S3-compatible stores do not all report it faithfully).
        aborted = abort_uploads(self.objects, run_prefix, older_than=cutoff, keep_prefixes=tuple(kept))
        if doomed:
            log.info("deleted %d orphaned objects of run %s", len(doomed), run)
        return OrphanReport(run, tuple(sorted(doomed)), tuple(aborted), tuple(sorted(kept)))

    def _current_attempt(self, partition_prefix: str) -> str | None:
        raw = self.objects.manifest_bytes(partition_prefix + MANIFEST_NAME)
        if raw is None:
            return None
        try:
            return Manifest.from_json(raw.value).attempt_id
        except InvalidManifest:
            return None
