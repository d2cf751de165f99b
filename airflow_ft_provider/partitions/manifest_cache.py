"""Parsed manifests kept per process, keyed by the object's ETag, so that a page or check that lists a
run again reads only the manifests that changed.

An availability check lists the run's prefix anyway, and the listing gives every manifest's ETag (a new
one with every write of the object). A manifest read before under the same store, key and ETag is the
same object: it is answered from here instead of a GET (the failover page of a 1,000-partition run
reads 1,000 manifests otherwise, on every load). Entries are keyed by the ETag the GET itself returned,
never by the listing's, so an object rewritten between the two is never cached under the wrong content.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from .manifest import Manifest
from .s3_client import S3Client

DEFAULT_ENTRIES = 20_000  # a few KB each: tens of MB at most, in the API server


@dataclass(frozen=True)
class ManifestKey:
    store: str  # the endpoint and bucket: two stores never share an entry
    key: str
    etag: str


def store_name(client: S3Client, bucket: str) -> str:
    """What tells two stores apart: the endpoint the client talks to, and the bucket."""
    return f"{getattr(getattr(client, 'meta', None), 'endpoint_url', '')}/{bucket}"


class ManifestCache:
    """A bounded, thread-safe LRU of parsed (already validated) manifests."""

    def __init__(self, entries: int = DEFAULT_ENTRIES) -> None:
        self.entries = entries
        self._items: OrderedDict[ManifestKey, Manifest] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: ManifestKey) -> Manifest | None:
        with self._lock:
            manifest = self._items.get(key)
            if manifest is not None:
                self._items.move_to_end(key)
            return manifest

    def put(self, key: ManifestKey, manifest: Manifest) -> None:
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


MANIFESTS = ManifestCache()
