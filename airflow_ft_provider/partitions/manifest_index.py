"""A run's manifests in one object, written when the run ends, so that a reader who lists the run reads
one object instead of one GET per manifest (``airflow-ft partitions``, the failover page).

Like Delta Lake's checkpoint of its log, the index is a copy, never the truth. Each entry keeps a
manifest's bytes and the ETag of the GET that read them. A reader takes an entry only when the listing it
has just made gives that manifest key the same ETag (and, where the ETag is an MD5 of the object, as S3's
is for objects written in one PUT, only when the bytes hash to it), then validates the bytes as a
manifest of the partition it asked for. Anything else (a manifest committed again since, a damaged or
foreign index, no index) is read from S3 as without one. So the index can be stale, partial or missing
and no reader ever sees a manifest that is not the one in the store now; failover decisions do not use it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import reprlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

from ..safe_json import InvalidJson, load_json
from .errors import PartitionStoreError
from .manifest import MAX_MANIFEST_BYTES
from .naming import MANIFEST_NAME, RunRef
from .s3_objects import StoreObjects

log = logging.getLogger(__name__)

INDEX_VERSION = 1
INDEX_MARKER = "manifest-index"  # <run>/_run/manifest-index.json, beside the run's life-cycle markers
MAX_INDEX_BYTES = 64 << 20  # 64 MiB: tens of thousands of manifests; never read past it
# Seconds of manifest reads at a run end: the DAG processor's callback, which Airflow stops after
# [dag_processor] dag_file_processor_timeout (50 s) with the sweep still to do. ~4,000 manifests on S3.
WRITE_BUDGET = 10.0
_MANIFEST = "/" + MANIFEST_NAME
# <result>/<map index>/manifest.json (naming.StoreLayout.partition_prefix): nothing that leaves the run
_MANIFEST_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,249}/(?:-1|0|[1-9][0-9]{0,18})/manifest\.json\Z")
_MD5_ETAG = re.compile(r"^[0-9a-f]{32}\Z")
_ETAG = re.compile(r"^[\x21\x23-\x7e]{1,200}\Z")  # visible ASCII but '"', as in a manifest's file ETags


@dataclass(frozen=True)
class IndexWritten:
    """What a run end's index holds: ``indexed`` manifests, ``kept`` of them from the previous index,
    and ``left_out`` that were not read within the budget (or all, for an index over the size limit)."""

    indexed: int
    kept: int
    left_out: int


class InvalidManifestIndex(ValueError):
    """The index object is not one this provider wrote for the run (readers then go without it)."""


@dataclass(frozen=True)
class IndexedManifest:
    etag: str  # the ETag of the GET that returned ``raw``
    raw: bytes


@dataclass(frozen=True)
class ManifestIndex:
    """The manifests of one run as they were read at its end, by manifest key."""

    run: RunRef
    entries: Mapping[str, IndexedManifest]

    def raw(self, key: str, listed_etag: str | None) -> bytes | None:
        """The bytes of the manifest at ``key`` if the index holds the object a listing calls
        ``listed_etag``; else None (read it from S3)."""
        entry = self.entries.get(key)
        if entry is None or listed_etag is None or entry.etag != listed_etag:
            return None
        if (
            _MD5_ETAG.match(entry.etag)
            and hashlib.md5(entry.raw, usedforsecurity=False).hexdigest() != entry.etag
        ):
            return None  # damaged: not the object the ETag names
        return entry.raw

    def to_json(self, blocking_prefix: str) -> bytes:
        return json.dumps(
            {
                "version": INDEX_VERSION,
                "pipeline": self.run.pipeline,
                "run_id": self.run.run_id,
                "manifests": [
                    {"key": key[len(blocking_prefix) :], "etag": e.etag, "manifest": e.raw.decode("utf-8")}
                    for key, e in sorted(self.entries.items())
                ],
            }
        ).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, run: RunRef, blocking_prefix: str) -> ManifestIndex:
        """Parse and validate; ``InvalidManifestIndex`` names the first problem found."""
        try:
            doc = load_json(data, max_bytes=MAX_INDEX_BYTES)
        except InvalidJson as exc:
            raise InvalidManifestIndex(f"not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("version") != INDEX_VERSION:
            version = doc.get("version") if isinstance(doc, dict) else type(doc).__name__
            raise InvalidManifestIndex(f"expected an object with version {INDEX_VERSION}, got {version!r}")
        if (doc.get("pipeline"), doc.get("run_id")) != (run.pipeline, run.run_id):
            raise InvalidManifestIndex(
                f"it describes run {doc.get('pipeline')!r}/{doc.get('run_id')!r}, expected {run}"
            )
        items = doc.get("manifests")
        if not isinstance(items, list):
            raise InvalidManifestIndex("'manifests' must be a list")
        entries: dict[str, IndexedManifest] = {}
        for number, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidManifestIndex(f"manifests[{number}] must be an object")
            key, etag, text = item.get("key"), item.get("etag"), item.get("manifest")
            if not (isinstance(etag, str) and _ETAG.match(etag)) or not isinstance(text, str):
                raise InvalidManifestIndex(f"manifests[{number}] needs a string 'etag' and 'manifest'")
            if not isinstance(key, str) or not _MANIFEST_KEY.match(key):
                raise InvalidManifestIndex(
                    f"manifests[{number}]: {reprlib.repr(key)} is not a manifest key "
                    f"<result>/<map index>/{MANIFEST_NAME}"
                )
            entries[blocking_prefix + key] = IndexedManifest(etag, text.encode("utf-8"))
        return cls(run, entries)


def _indexable(raw: bytes) -> bool:
    """A manifest the index can hold: text (the index stores it as a JSON string) within the manifest
    size limit (a longer one was cut short by the read, and is invalid anyway)."""
    if len(raw) > MAX_MANIFEST_BYTES:
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class ManifestIndexes:
    """Writes a run's index (at its end) and reads it back (for people's reads of the whole run)."""

    def __init__(self, objects: StoreObjects) -> None:
        self.objects = objects

    def key(self, run: RunRef) -> str:
        return self.objects.layout.marker_key(run, INDEX_MARKER)

    def write(self, run: RunRef, *, budget: float = WRITE_BUDGET) -> IndexWritten:
        """Index the manifests of the run's blocking partitions as the store has them now, and put the
        index (rewritten whole at every run end). An entry of the run's previous index that is still
        the listed object is kept; the others are read, 8 at a time, for at most ``budget`` seconds, and
        those not read by then are left out (a reader GETs them as without an index)."""
        prefix = self.objects.layout.blocking_prefix(run)
        listing = self.objects.list_under(prefix)
        listed = {key: info.etag for key, info in listing.items() if key.endswith(_MANIFEST)}
        previous = self.read(run, quiet=True) if listed else None
        entries: dict[str, IndexedManifest] = {}
        for key, etag in listed.items():
            if etag is not None and previous is not None and (same := previous.raw(key, etag)) is not None:
                entries[key] = IndexedManifest(etag, same)
        kept = len(entries)
        pool = ThreadPoolExecutor(max_workers=self.objects.max_workers, thread_name_prefix="ft-index")
        try:
            reads = {pool.submit(self.objects.manifest_bytes, k): k for k in listed if k not in entries}
            done, _ = wait(reads, timeout=budget)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # reads past the budget: left out
        for future in done:
            read = future.result() if future.exception() is None else None
            if read is not None and _indexable(read.value) and _ETAG.match(got := read.etag.strip('"')):
                entries[reads[future]] = IndexedManifest(got, read.value)
        data = ManifestIndex(run, entries).to_json(prefix)
        if len(data) > MAX_INDEX_BYTES:
            log.warning(
                "run %s: its %d manifests make a %d-byte index, over the %d-byte limit: not written "
                "(reads of the run read every manifest)",
                run,
                len(entries),
                len(data),
                MAX_INDEX_BYTES,
            )
            return IndexWritten(0, 0, len(listed))
        self.objects.write_object(self.key(run), data)
        return IndexWritten(len(entries), kept, len(listed) - len(entries))

    def read(self, run: RunRef, *, quiet: bool = False) -> ManifestIndex | None:
        """The run's index, or None when it has none or it does not validate (then said in the log,
        unless ``quiet``: the writer replaces it)."""
        key = self.key(run)
        try:
            # Cut short past the limit: then it fails as JSON, never read whole into memory
            raw = self.objects.conditional_objects(max_bytes=MAX_INDEX_BYTES).get_bytes(
                key, oversized="truncate"
            )
        except PartitionStoreError as exc:
            (log.debug if quiet else log.warning)(
                "could not read the manifest index s3://%s/%s (%s); reading every manifest",
                self.objects.bucket,
                key,
                exc,
            )
            return None
        if raw is None:
            return None
        try:
            return ManifestIndex.from_json(raw.value, run, self.objects.layout.blocking_prefix(run))
        except InvalidManifestIndex as exc:
            (log.debug if quiet else log.warning)(
                "the manifest index s3://%s/%s is invalid (%s); reading every manifest instead. The run's "
                "next end rewrites it, or delete it",
                self.objects.bucket,
                key,
                exc,
            )
            return None
