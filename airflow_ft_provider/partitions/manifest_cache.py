"""Parsed manifests kept per process, keyed by the object's ETag, so that a page or check that lists a
run again reads only the manifests that changed; and, for a command that starts afresh each time
(``airflow-ft partitions``), their bytes on the machine's disk as a second tier.

An availability check lists the run's prefix anyway, and the listing gives every manifest's ETag (a new
one with every write of the object). A manifest read before under the same store, key and ETag is the
same object: it is answered from here instead of a GET (the failover page of a 1,000-partition run
reads 1,000 manifests otherwise, on every load). Entries are keyed by the ETag the GET itself returned,
never by the listing's, so an object rewritten between the two is never cached under the wrong content.
The disk tier keeps the bytes, not the parsed object: a file from disk is validated again as a manifest
of the partition asked for, as if S3 had just returned it, and anything else is a miss.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .manifest import InvalidManifest, Manifest
from .s3_client import S3Client

DEFAULT_ENTRIES = 20_000  # a few KB each: tens of MB at most, in the API server


@dataclass(frozen=True)
class ManifestKey:
    store: str  # the endpoint and bucket: two stores never share an entry
    key: str
    etag: str


class ManifestSource(Protocol):
    """Manifest bytes known without a GET (a run's index): those of the object a listing named by
    ``listed_etag``, or None. The reader still validates them as the partition's manifest."""

    def raw(self, key: str, listed_etag: str | None) -> bytes | None: ...


def store_name(client: S3Client, bucket: str) -> str:
    """What tells two stores apart: the endpoint the client talks to, and the bucket."""
    return f"{getattr(getattr(client, 'meta', None), 'endpoint_url', '')}/{bucket}"


class ManifestCache:
    """A bounded, thread-safe LRU of parsed (already validated) manifests, over an optional disk tier."""

    def __init__(self, entries: int = DEFAULT_ENTRIES) -> None:
        self.entries = entries
        self._items: OrderedDict[ManifestKey, Manifest] = OrderedDict()
        self._lock = threading.Lock()
        self.disk: DiskTier | None = None

    def get(
        self,
        key: ManifestKey,
        parse: Callable[[bytes], Manifest] | None = None,
        source: ManifestSource | None = None,
    ) -> Manifest | None:
        """The manifest under ``key``; if not here, from the disk tier, then from ``source`` (a run's
        index), whose bytes ``parse`` validates. Only the disk tier's are kept on disk."""
        with self._lock:
            manifest = self._items.get(key)
            if manifest is not None:
                self._items.move_to_end(key)
                return manifest
        if parse is None:
            return None
        if self.disk is not None and (manifest := self._valid(self.disk.get(key), parse)) is not None:
            self._remember(key, manifest)
            return manifest
        if source is not None and (manifest := self._valid(source.raw(key.key, key.etag), parse)) is not None:
            self._remember(key, manifest)
            return manifest
        return None

    @staticmethod
    def _valid(raw: bytes | None, parse: Callable[[bytes], Manifest]) -> Manifest | None:
        """``raw`` as a manifest; None if there is none, or it is damaged or not this partition's."""
        if raw is None:
            return None
        try:
            return parse(raw)
        except InvalidManifest:
            return None

    def holds(self, key: ManifestKey) -> bool:
        """Whether ``key`` is answered from memory (the disk tier is not asked)."""
        with self._lock:
            return key in self._items

    def put(self, key: ManifestKey, manifest: Manifest, raw: bytes | None = None) -> None:
        self._remember(key, manifest)
        if self.disk is not None and raw is not None:
            self.disk.put(key, raw)

    def _remember(self, key: ManifestKey, manifest: Manifest) -> None:
        with self._lock:
            self._items[key] = manifest
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


class DiskTier:
    """Manifest bytes in files named by a hash of (store, key, ETag), written atomically; at most
    ``max_files``, the least recently written removed first when a process starts using it."""

    def __init__(self, folder: Path, max_files: int = 50_000) -> None:
        self.folder = folder
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        files = list(folder.glob("*.json"))
        if len(files) > max_files:  # only then each file's age: a command's start lists names alone
            files.sort(key=lambda p: p.stat().st_mtime)
            for old in files[: len(files) - max_files]:
                old.unlink(missing_ok=True)

    def _path(self, key: ManifestKey) -> Path:
        name = hashlib.sha256(f"{key.store}\n{key.key}\n{key.etag}".encode()).hexdigest()
        return self.folder / f"{name}.json"

    def get(self, key: ManifestKey) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except OSError:
            return None

    def put(self, key: ManifestKey, raw: bytes) -> None:
        """Best effort: a cache that cannot be written is only slower."""
        try:
            fd, temp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(raw)
            os.replace(temp, self._path(key))
        except OSError:
            Path(temp).unlink(missing_ok=True)  # no half-written file left behind


def default_disk_folder() -> Path:
    """``$XDG_CACHE_HOME/airflow-ft/manifests`` (``~/.cache/...`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "airflow-ft" / "manifests"


MANIFESTS = ManifestCache()
