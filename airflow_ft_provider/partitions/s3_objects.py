"""What every protocol of the partition store stands on: the S3 client, error translation, listing,
deleting, reading manifests, and a small public API for JSON objects kept beside partitions.

The store (``store.S3PartitionStore``) is a façade over one of these and one component per protocol
(commits, reads, reuse, availability, consumer leases, retention), each holding it; every component
reaches S3 only through these methods, which turn botocore errors into ``PartitionStoreError``s that
name bucket, key and operation.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, cast

from ..failover.clock import Clock
from .cache import LocalPartitionCache
from .conditional import MAX_OBJECT_BYTES, ConditionalJsonStore, Versioned, require_conditional_writes
from .errors import (
    MISSING_CODES,
    PartitionNotFound,
    PartitionStoreError,
    Unavailable,
    error_code,
    s3_errors,
)
from .manifest import MAX_MANIFEST_BYTES, InvalidManifest, Manifest
from .manifest_cache import MANIFESTS, ManifestKey, ManifestSource, store_name
from .naming import MANIFEST_NAME, PartitionRef, RunRef, StoreLayout
from .s3_client import ClientFactory, ClientOrFactory, ObjectBody, S3Client

if TYPE_CHECKING:
    from boto3.s3.transfer import TransferConfig


log = logging.getLogger(__name__)


StepHook = Callable[[str, Mapping[str, object]], None]


@dataclass(frozen=True)
class _Location:
    """Where one partition's manifest and attempts live (blocking, or scratch of one execution)."""

    ref: PartitionRef
    kind: str
    prefix: str

    @property
    def manifest_key(self) -> str:
        return self.prefix + MANIFEST_NAME


@dataclass(frozen=True)
class ObjectInfo:
    size: int
    last_modified: float
    etag: str | None = None  # without quotes; a new one with every write of the object


def bare_etag(value: object) -> str | None:
    """An S3 ETag without its quotes (None if the endpoint sent none)."""
    return value.strip('"') if isinstance(value, str) and value.strip('"') else None


class StoreObjects:
    """The S3 access the store's protocols share: one per store, each protocol holds it."""

    def __init__(
        self,
        client: ClientOrFactory,
        layout: StoreLayout,
        *,
        cache: LocalPartitionCache | None,
        checksum: str,
        transfer_config: TransferConfig,
        clock: Clock,
        on_step: StepHook | None,
        max_workers: int,
        credentials: str,
        allow_unconditional_writes: bool,
    ) -> None:
        if not isinstance(allow_unconditional_writes, bool):
            raise ValueError(
                f"allow_unconditional_writes must be True or False, got {allow_unconditional_writes!r}"
            )
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be an integer ≥ 1, got {max_workers!r}")
        self.layout = layout
        self.credentials = credentials  # whose credentials the client uses, named in error hints
        # Unsafe: go on when the endpoint ignores If-None-Match / If-Match (see require_conditional_writes).
        self.allow_unconditional_writes = allow_unconditional_writes
        self.cache = cache
        self.checksum = checksum
        self.transfer_config = transfer_config
        self.max_workers = max_workers
        self._client_or_factory = client
        self._client: S3Client | None = None
        self._client_lock = threading.Lock()
        self.clock = clock
        self.on_step = on_step

    @property
    def bucket(self) -> str:
        return self.layout.bucket

    @property
    def client(self) -> S3Client:
        with self._client_lock:
            if self._client is None:
                c = self._client_or_factory
                self._client = cast(S3Client, c) if hasattr(c, "put_object") else cast(ClientFactory, c)()
            return self._client

    @property
    def json_objects(self) -> ConditionalJsonStore:
        """The compare-and-swap primitive on this store's bucket, for state kept beside partitions."""
        return self.conditional_objects()

    def conditional_objects(self, *, max_bytes: int = MAX_OBJECT_BYTES) -> ConditionalJsonStore:
        """``json_objects`` with other settings, e.g. ``max_bytes`` for objects larger than 1 MiB."""
        return ConditionalJsonStore(
            self.client,
            self.bucket,
            credentials=self.credentials,
            probe_prefix=self.layout.prefix,
            allow_unconditional_writes=self.allow_unconditional_writes,
            max_bytes=max_bytes,
        )

    def require_conditional_writes(self) -> None:
        """Fail (ConditionalWritesUnsupported) unless the endpoint enforces conditional PUTs; probed once
        per endpoint and bucket per process, with an object under the store's prefix that is removed."""
        require_conditional_writes(
            self.client,
            self.bucket,
            self.layout.prefix,
            allow_unconditional=self.allow_unconditional_writes,
            credentials=self.credentials,
        )

    def s3_errors(self, operation: str, key: str | None) -> AbstractContextManager[None]:
        return s3_errors(operation, self.bucket, key, credentials=self.credentials)

    def step(self, step: str, **info: object) -> None:
        if self.on_step is not None:
            self.on_step(step, info)

    def blocking(self, ref: PartitionRef) -> _Location:
        return _Location(ref, "blocking", self.layout.partition_prefix(ref))

    def scratch(self, ref: PartitionRef, execution_id: str) -> _Location:
        return _Location(ref, "pipelined", self.layout.scratch_prefix(ref, execution_id))

    def location(self, ref: PartitionRef, execution_id: str | None) -> _Location:
        return self.blocking(ref) if execution_id is None else self.scratch(ref, execution_id)

    def check_connection(self) -> None:
        """One small listing of the prefix; a PartitionStoreError names the problem (bucket, keys, endpoint).

        Not HeadBucket: a HEAD response has no body, so S3 could only say 403 or 404, not why.
        """
        with self.s3_errors("ListObjectsV2", self.layout.prefix or None):
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.layout.prefix, MaxKeys=1)

    def manifest(self, ref: PartitionRef) -> Manifest:
        """The committed manifest of a blocking partition; PartitionNotFound when missing or invalid."""
        return self.read_manifest(self.blocking(ref))

    def manifest_bytes(self, key: str) -> Versioned[bytes] | None:
        """The object at a manifest key. An oversized one comes back cut short, so that it parses as
        an invalid manifest (which the next commit replaces) rather than failing the caller."""
        return self.conditional_objects(max_bytes=MAX_MANIFEST_BYTES).get_bytes(key, oversized="truncate")

    def read_manifest(
        self, loc: _Location, etag: str | None = None, index: ManifestSource | None = None
    ) -> Manifest:
        """With the ETag a listing just gave, a manifest read before, or held by the run's ``index``,
        comes from ``manifest_cache.py``."""
        cache_key = partial(ManifestKey, store_name(self.client, self.bucket), loc.manifest_key)
        parse = partial(Manifest.from_json, expected=loc.ref, kind=loc.kind)
        if etag is not None and (cached := MANIFESTS.get(cache_key(etag), parse, index)) is not None:
            return cached
        raw = self.manifest_bytes(loc.manifest_key)
        if raw is None:
            raise PartitionNotFound(
                loc.ref.partition_id,
                Unavailable.MISSING_MANIFEST,
                f"no s3://{self.bucket}/{loc.manifest_key}",
                run=str(loc.ref.run),
            )
        try:
            manifest = parse(raw.value)
        except InvalidManifest as exc:
            raise PartitionNotFound(
                loc.ref.partition_id, Unavailable.INVALID_MANIFEST, str(exc), run=str(loc.ref.run)
            ) from None
        if etag := bare_etag(raw.etag):  # the GET's own ETag names the content parsed
            MANIFESTS.put(cache_key(etag), manifest, raw.value)
        return manifest

    # -- objects beside partitions (journal, markers, fault injection): keys inside the store only --
    def inside_store(self, key: str) -> str:
        if not isinstance(key, str) or not key.startswith(self.layout.prefix) or "/../" in f"/{key}/":
            raise ValueError(f"{key!r} is outside the store's prefix {self.layout.prefix!r}")
        return key

    def write_object(self, key: str, data: bytes, *, content_type: str = "application/json") -> None:
        """Put one object (unconditionally: for objects each writer names uniquely, or rewrites whole)."""
        self.inside_store(key)
        with self.s3_errors("PutObject", key):
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)

    def read_object(self, key: str) -> bytes | None:
        """The whole object at ``key``; None when there is none."""
        self.inside_store(key)
        with self.s3_errors("GetObject", key):
            body = self.open_object(key)
            if body is None:
                return None
            with body:
                return body.read()

    def open_object(self, key: str) -> ObjectBody | None:
        """The streaming body of the object at ``key``, None when there is none (S3 errors: the
        caller's ``_s3_errors`` names the operation)."""
        from botocore.exceptions import ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        except ClientError as exc:
            if error_code(exc) in MISSING_CODES:
                return None
            raise

    def upload_file(self, key: str, path: str | os.PathLike[str]) -> None:
        """Upload a local file to ``key`` (multipart when large, as the store's transfer config says)."""
        self.inside_store(key)
        with self.s3_errors("PutObject", key):
            self.client.upload_file(str(path), self.bucket, key, Config=self.transfer_config)

    def download_file(self, key: str, path: str | os.PathLike[str]) -> bool:
        """Download ``key`` to a local file; False when there is no such object."""
        from botocore.exceptions import ClientError

        self.inside_store(key)
        with self.s3_errors("GetObject", key):
            try:
                self.client.download_file(self.bucket, key, str(path), Config=self.transfer_config)
            except ClientError as exc:
                if error_code(exc) in MISSING_CODES:
                    return False
                raise
        return True

    def list_objects(self, prefix: str) -> dict[str, ObjectInfo]:
        """Every key under ``prefix`` (inside this store) with its size and last-modified time."""
        return self.list_under(self.inside_store(prefix))

    def modified_times(self, prefix: str) -> dict[str, float]:
        """Every key under ``prefix`` (inside this store) with its last-modified time (epoch seconds)."""
        return {key: info.last_modified for key, info in self.list_objects(prefix).items()}

    def delete_keys(self, keys: Iterable[str]) -> int:
        """Delete keys inside this store (releases of data nobody reads again); how many."""
        keys = [self.inside_store(k) for k in keys]
        self.delete_batch(keys)
        return len(keys)

    def head(self, key: str) -> ObjectInfo | None:
        from botocore.exceptions import ClientError

        with self.s3_errors("HeadObject", key):
            try:
                response = self.client.head_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if error_code(exc) in MISSING_CODES:
                    return None
                raise
        return ObjectInfo(
            response["ContentLength"], response["LastModified"].timestamp(), bare_etag(response.get("ETag"))
        )

    def list_under(self, prefix: str) -> dict[str, ObjectInfo]:
        objects: dict[str, ObjectInfo] = {}
        with self.s3_errors("ListObjectsV2", prefix):
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix
            ):
                for obj in page.get("Contents", ()):
                    objects[obj["Key"]] = ObjectInfo(
                        obj["Size"], obj["LastModified"].timestamp(), bare_etag(obj.get("ETag"))
                    )
        return objects

    def list_prefixes(self, prefix: str) -> list[str]:
        prefixes: list[str] = []
        with self.s3_errors("ListObjectsV2", prefix):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix, Delimiter="/"
            )
            for page in pages:
                prefixes.extend(p["Prefix"] for p in page.get("CommonPrefixes", ()))
        return prefixes

    def runs(self, pipeline: str) -> list[RunRef]:
        """The runs of ``pipeline`` that have data in this store (one LIST)."""
        runs = []
        for prefix in self.list_prefixes(self.layout.pipeline_prefix(pipeline)):
            try:
                runs.append(self.layout.run_from_prefix(pipeline, prefix))
            except ValueError:
                continue  # not a run directory of ours
        return runs

    def put_json(self, key: str, value: object) -> None:

        with self.s3_errors("PutObject", key):
            self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=json.dumps(value).encode("utf-8"),
                ContentType="application/json",
            )

    def delete_batch(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            with self.s3_errors("DeleteObjects", batch[0]):
                response = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                )
            errors = response.get("Errors") or []
            if errors:
                first = errors[0]
                raise PartitionStoreError(
                    f"S3 DeleteObjects failed for {len(errors)} of {len(batch)} keys, first s3://{self.bucket}/"
                    f"{first.get('Key')} with {first.get('Code')}: {first.get('Message', '')}",
                    bucket=self.bucket,
                    key=first.get("Key"),
                    code=first.get("Code"),
                    operation="DeleteObjects",
                )
