"""Consumer leases: a registered consumer blocks the release of the partitions it still reads."""

from __future__ import annotations

import logging
import reprlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..safe_json import is_finite_number, load_json
from .errors import (
    ConsumerRegistrationRefused,
    ReleaseRefused,
)
from .naming import (
    PartitionRef,
    RunRef,
    check_encoded_name,
    decode_segment,
)
from .s3_objects import StoreObjects

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


MAX_MARKER_BYTES = 64 * 1024  # leases and run markers are a few hundred bytes


@dataclass(frozen=True)
class Lease:
    """A registered consumer; while it is active, release of the partitions it names is refused."""

    consumer: str
    partitions: tuple[str, ...] | None  # None: every partition of the run
    registered_at: float
    expires_at: float | None = None

    def active(self, now: float) -> bool:
        return self.expires_at is None or now < self.expires_at

    def covers(self, partitions: Iterable[str] | None) -> bool:
        if partitions is None or self.partitions is None:
            return True
        return not set(self.partitions).isdisjoint(partitions)


def _decode_lease_name(name: str) -> str:
    try:
        return decode_segment(name.removesuffix(".json"))
    except ValueError:
        return name


def _finite(value: object, name: str) -> float:
    """A JSON number that is a finite float (not a bool, not a string such as "nan")."""
    if not is_finite_number(value):
        raise ValueError(f"{name!r} must be a number of seconds since the epoch, got {reprlib.repr(value)}")
    return float(value)


def _names(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name!r} must be null or a list of partition ids, got {reprlib.repr(value)}")
    return tuple(value)


def _released_partitions(data: bytes) -> tuple[str, ...] | None:
    """What a release marker says is being released; None (everything) when it says so or is damaged."""
    try:
        doc = load_json(data, max_bytes=MAX_MARKER_BYTES)
        partitions = doc.get("partitions") if isinstance(doc, dict) else None
        return None if partitions is None else _names(partitions, "partitions")
    except ValueError:
        return None


def _parse_lease(data: bytes, *, fallback: str) -> Lease:
    """A lease that does not parse still blocks release (safe side), under its key's name."""
    try:
        doc = load_json(data, max_bytes=MAX_MARKER_BYTES)
        if not isinstance(doc, dict) or not isinstance(doc.get("consumer"), str):
            raise ValueError("expected an object with a 'consumer' string")
        partitions = doc.get("partitions")
        expires_at = doc.get("expires_at")
        return Lease(
            consumer=doc["consumer"],
            partitions=None if partitions is None else _names(partitions, "partitions"),
            registered_at=_finite(doc.get("registered_at", 0.0), "registered_at"),
            expires_at=None if expires_at is None else _finite(expires_at, "expires_at"),
        )
    except ValueError as exc:
        log.warning(
            "lease %r does not parse (%s); it blocks every release of its run until deleted", fallback, exc
        )
        return Lease(fallback, None, 0.0, None)


class ConsumerLeases:
    """Lease protocol: register / unregister / list consumers; release and registration exclude each other."""

    def __init__(self, objects: StoreObjects) -> None:
        self.objects = objects

    def register_consumer(
        self,
        pipeline: str,
        run_id: str,
        consumer: str,
        *,
        partitions: Iterable[str | PartitionRef] | None = None,
        ttl: float | None = None,
    ) -> Lease:
        """Declare that ``consumer`` (e.g. a task id) may still read these partitions (None: all).

        Registering again refreshes the lease. Refused once a release of the partitions has started.
        """
        run = RunRef(pipeline, run_id)
        check_encoded_name("consumer", consumer)
        pids = None if partitions is None else tuple(sorted({run.parse(p).partition_id for p in partitions}))
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0):
            raise ValueError(f"lease ttl must be None (until unregistered) or seconds > 0, got {ttl!r}")
        now = self.objects.clock.now()
        lease = Lease(consumer, pids, now, None if ttl is None else now + ttl)
        self._refuse_if_releasing(run, consumer, pids)
        key = self.objects.layout.lease_key(run, consumer)
        self.objects.put_json(
            key,
            {
                "consumer": consumer,
                "partitions": None if pids is None else list(pids),
                "registered_at": lease.registered_at,
                "expires_at": lease.expires_at,
            },
        )
        # Release writes its marker, then lists leases; we write the lease, then read the marker.
        # With S3's strong consistency one of the two sees the other, so they never both proceed.
        try:
            self._refuse_if_releasing(run, consumer, pids)
        except ConsumerRegistrationRefused:
            self.objects.delete_batch([key])
            raise
        return lease

    def unregister_consumer(self, pipeline: str, run_id: str, consumer: str) -> None:
        run = RunRef(pipeline, run_id)
        self.objects.delete_batch([self.objects.layout.lease_key(run, consumer)])

    def consumers(self, pipeline: str, run_id: str, *, include_expired: bool = False) -> list[Lease]:
        run = RunRef(pipeline, run_id)
        prefix = self.objects.layout.leases_prefix(run)
        now = self.objects.clock.now()
        leases = []
        for key in sorted(self.objects.list_under(prefix)):
            raw = self.objects.json_objects.get_bytes(
                key, oversized="truncate"
            )  # too big: invalid, so blocking
            if raw is None:
                continue
            lease = _parse_lease(raw.value, fallback=_decode_lease_name(key[len(prefix) :]))
            if include_expired or lease.active(now):
                leases.append(lease)
        return leases

    def _refuse_if_leased(self, run: RunRef, pids: tuple[str, ...] | None) -> None:
        blocking = [
            lease.consumer for lease in self.consumers(run.pipeline, run.run_id) if lease.covers(pids)
        ]
        if blocking:
            raise ReleaseRefused(str(run), blocking, None if pids is None else list(pids))

    def _refuse_if_releasing(self, run: RunRef, consumer: str, pids: tuple[str, ...] | None) -> None:
        store = self.objects.json_objects
        for marker in ("released", "releasing"):
            key = self.objects.layout.marker_key(run, marker)
            raw = store.get_bytes(key, oversized="truncate")
            if raw is None:
                continue
            released = _released_partitions(raw.value)  # None: all (also when the marker is damaged)
            if marker == "released" or released is None or pids is None or set(released) & set(pids):
                raise ConsumerRegistrationRefused(
                    f"consumer {consumer!r} cannot register on run {run}: its partitions "
                    f"{'were' if marker == 'released' else 'are being'} released "
                    f"(s3://{self.objects.bucket}/{key}); "
                    "re-run the producers (a new run) instead"
                )
