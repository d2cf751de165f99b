"""Compare-and-swap of small JSON objects on S3, for state that many workers update (no lost update).

S3 conditional writes do the work: ``PutObject(IfNoneMatch='*')`` creates only if absent and
``PutObject(IfMatch=<etag>)`` replaces only the version that was read. A writer that loses the race
gets 412 (or 409 while another conditional write is in flight) and re-reads. Used for partition
manifests (fencing of zombie producers) and for any per-run state kept beside the partitions.

Some S3-compatible stores accept both headers and ignore them: every write then wins, and fencing and
compare-and-swap fail silently. So before its first conditional write a process probes each endpoint
and bucket once (``require_conditional_writes``) and refuses to go on if the conditions are ignored.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import urlsplit

from ..safe_json import InvalidJson, load_json
from .errors import DEFAULT_CREDENTIALS, MISSING_CODES, PartitionStoreError, error_code, s3_errors
from .s3_client import S3Client

log = logging.getLogger(__name__)

MAX_OBJECT_BYTES = 1 << 20
# 412: the condition failed; 409: a concurrent conditional write is in progress (retry);
# NoSuchKey: IfMatch on an object that was deleted meanwhile.
CONFLICT_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}) | MISSING_CODES

T = TypeVar("T")
ALLOW_UNCONDITIONAL_KEY = "partition_store_allow_unconditional_writes"
PROBE_DIR = ".ft-probe/"  # under the store's prefix; a leading '.' is never a pipeline (DAG id) directory


class ConditionalWriteConflict(Exception):
    """The object changed since it was read (or exists, for a create); re-read and decide again."""

    def __init__(self, bucket: str, key: str, expected_etag: str | None, code: str) -> None:
        self.bucket = bucket
        self.key = key
        self.expected_etag = expected_etag
        self.code = code
        expected = "absent" if expected_etag is None else f"at ETag {expected_etag}"
        super().__init__(f"s3://{bucket}/{key} was expected {expected} but changed ({code}); re-read it")


@dataclass(frozen=True)
class Versioned(Generic[T]):
    """A value together with the ETag of the object it was read from (the CAS token)."""

    value: T
    etag: str


class ConditionalJsonStore:
    """Read, create, replace and atomically update JSON objects in one bucket."""

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        *,
        max_bytes: int = MAX_OBJECT_BYTES,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        credentials: str = DEFAULT_CREDENTIALS,
        probe_prefix: str = "",
        allow_unconditional_writes: bool = False,
    ) -> None:
        self._client = client
        self.bucket = bucket
        self.credentials = credentials  # whose credentials, for error hints
        self.max_bytes = max_bytes
        self.probe_prefix = probe_prefix  # where the conditional-write probe may put its object
        self.allow_unconditional_writes = allow_unconditional_writes
        self._sleep = sleep
        self._rng = rng or random.Random()

    # -- raw bytes --------------------------------------------------------------------------------
    def get_bytes(self, key: str, *, oversized: str = "raise") -> Versioned[bytes] | None:
        """The object's bytes and ETag, or None when absent; refuses objects over ``max_bytes``, or with
        ``oversized="truncate"`` returns their first ``max_bytes + 1`` bytes (for callers whose parser
        rejects them as invalid and may then replace them)."""
        from botocore.exceptions import ClientError

        with s3_errors("GetObject", self.bucket, key, credentials=self.credentials):
            try:
                response = self._client.get_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if error_code(exc) in MISSING_CODES:
                    return None
                raise
            body = response["Body"]
            try:
                if response.get("ContentLength", 0) > self.max_bytes and oversized != "truncate":
                    raise PartitionStoreError(
                        f"s3://{self.bucket}/{key} is {response['ContentLength']} bytes, over the "
                        f"{self.max_bytes}-byte limit for a JSON state object; it is not ours or is corrupt",
                        bucket=self.bucket,
                        key=key,
                        code="ObjectTooLarge",
                        operation="GetObject",
                    )
                data = body.read(self.max_bytes + 1)
            finally:
                body.close()
        return Versioned(data, response["ETag"])

    def put_bytes(self, key: str, data: bytes, *, etag: str | None) -> str:
        """Create (``etag=None``) or replace the version with ``etag``; returns the new ETag."""
        from botocore.exceptions import ClientError

        require_conditional_writes(
            self._client,
            self.bucket,
            self.probe_prefix,
            allow_unconditional=self.allow_unconditional_writes,
            credentials=self.credentials,
        )
        condition = {"IfNoneMatch": "*"} if etag is None else {"IfMatch": etag}
        with s3_errors("PutObject", self.bucket, key, credentials=self.credentials):
            try:
                response = self._client.put_object(
                    Bucket=self.bucket, Key=key, Body=data, ContentType="application/json", **condition
                )
            except ClientError as exc:
                code = error_code(exc)
                if code in CONFLICT_CODES:
                    raise ConditionalWriteConflict(self.bucket, key, etag, code or "?") from None
                raise
        return response["ETag"]

    # -- JSON -------------------------------------------------------------------------------------
    def get(self, key: str) -> Versioned[object] | None:
        raw = self.get_bytes(key)
        if raw is None:
            return None
        return Versioned(self._load(key, raw.value), raw.etag)

    def create(self, key: str, value: object) -> str:
        return self.put_bytes(key, _dump(value), etag=None)

    def replace(self, key: str, value: object, etag: str) -> str:
        return self.put_bytes(key, _dump(value), etag=etag)

    def update(
        self, key: str, change: Callable[[object | None], object | None], *, max_attempts: int = 50
    ) -> Versioned[object] | None:
        """Read-modify-write until no one else wrote in between; ``change`` may run several times.

        ``change(current)`` gets the current value (None when absent) and returns the new value, or
        None to leave the object as it is; it may raise to abort. Returns what is stored afterwards.
        """
        stored = self.update_raw(
            key,
            lambda raw: None if (new := change(self._load(key, raw))) is None else _dump(new),
            max_attempts=max_attempts,
        )
        return None if stored is None else Versioned(self._load(key, stored.value), stored.etag)

    def update_raw(
        self,
        key: str,
        change: Callable[[bytes | None], bytes | None],
        *,
        max_attempts: int = 50,
        oversized: str = "raise",
    ) -> Versioned[bytes] | None:
        """``update`` on bytes, for callers with their own (validated) encoding such as manifests."""
        for attempt in range(max_attempts):
            current = self.get_bytes(key, oversized=oversized)
            new = change(None if current is None else current.value)
            if new is None:
                return current
            try:
                etag = self.put_bytes(key, new, etag=None if current is None else current.etag)
                return Versioned(new, etag)
            except ConditionalWriteConflict:
                # Someone else won this round; back off a little so that N writers do not livelock.
                self._sleep(self._rng.uniform(0, min(0.5, 0.005 * 2**attempt)))
        raise PartitionStoreError(
            f"s3://{self.bucket}/{key}: gave up after {max_attempts} conflicting concurrent updates; "
            "too many writers on one object",
            bucket=self.bucket,
            key=key,
            code="TooManyConflicts",
            operation="PutObject",
        )

    def _load(self, key: str, raw: bytes | None) -> object | None:
        return _load(self.bucket, key, raw, self.max_bytes)

    def delete(self, key: str) -> None:
        with s3_errors("DeleteObject", self.bucket, key, credentials=self.credentials):
            self._client.delete_object(Bucket=self.bucket, Key=key)


def _dump(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _load(bucket: str, key: str, raw: bytes | None, max_bytes: int) -> object | None:
    if raw is None:
        return None
    try:
        return load_json(raw, max_bytes=max_bytes)
    except InvalidJson as exc:
        raise PartitionStoreError(
            f"s3://{bucket}/{key} is not valid JSON ({exc}); delete or repair it",
            bucket=bucket,
            key=key,
            code="InvalidJson",
            operation="GetObject",
        ) from None


# -- is compare-and-swap real on this endpoint? ------------------------------------------------------
class ConditionalWritesUnsupported(PartitionStoreError):
    """The S3 endpoint ignores ``If-None-Match`` / ``If-Match``: fencing and compare-and-swap would
    silently fail (a zombie commit wins, a journal update is lost)."""


# (endpoint, bucket) -> None when conditional writes work, else what the probe found.
_probed: dict[tuple[str, str], str | None] = {}
_probe_locks: dict[tuple[str, str], threading.Lock] = {}
_probe_locks_lock = threading.Lock()
_STALE_ETAG = '"00000000000000000000000000000000"'
_PRECONDITION_FAILED = frozenset({"PreconditionFailed", "412"})
_NOT_IMPLEMENTED = frozenset({"NotImplemented", "501"})


def require_conditional_writes(
    client: S3Client,
    bucket: str,
    prefix: str = "",
    *,
    allow_unconditional: bool = False,
    credentials: str = DEFAULT_CREDENTIALS,
) -> None:
    """Probe once per endpoint and bucket in this process that conditional PUTs are enforced.

    Raises ConditionalWritesUnsupported when they are not, unless ``allow_unconditional`` (the
    ``[ft_provider] partition_store_allow_unconditional_writes`` setting), which logs a warning instead.
    S3 errors of the probe itself (credentials, permissions) are raised and the probe is tried again
    at the next write.
    """
    endpoint = _endpoint(client)
    where = (endpoint, bucket)
    with _probe_locks_lock:
        lock = _probe_locks.setdefault(where, threading.Lock())
    with lock:
        if where not in _probed:
            problem = _probe(client, bucket, prefix, credentials)
            _probed[where] = problem
            if problem is not None and allow_unconditional:
                log.warning(
                    "the S3 endpoint %s ignores conditional writes on bucket %s (%s); going on because "
                    "[ft_provider] %s is on: zombie commits may replace newer partitions and concurrent "
                    "journal updates may be lost",
                    endpoint,
                    bucket,
                    problem,
                    ALLOW_UNCONDITIONAL_KEY,
                )
    problem = _probed[where]
    if problem is not None and not allow_unconditional:
        raise ConditionalWritesUnsupported(
            f"the S3 endpoint {endpoint} ignores conditional writes on bucket {bucket}: {problem}. Without "
            "them a zombie try can replace a newer partition's manifest and concurrent updates of a run's "
            "recovery journal are lost, so the partition store refuses to write. Use an endpoint that "
            "enforces If-None-Match and If-Match on PutObject (AWS S3 does), or accept the risk by setting "
            f"[ft_provider] {ALLOW_UNCONDITIONAL_KEY} = True",
            bucket=bucket,
            code="ConditionalWritesIgnored",
            operation="PutObject",
        )


def _probe(client: S3Client, bucket: str, prefix: str, credentials: str) -> str | None:
    """Create, create again, replace with a stale ETag, replace with the right one; then delete.
    The second and third PUT must answer 412 Precondition Failed, the others succeed."""
    from botocore.exceptions import ClientError

    key = f"{prefix}{PROBE_DIR}conditional-writes-{uuid.uuid4().hex}.json"
    problems: list[str] = []

    def put(body: bytes, **condition: str) -> tuple[str | None, str | None]:
        """(ETag, None) when the PUT succeeded, (None, code) when the condition refused it or the
        endpoint does not implement it; any other error (credentials, outage) is raised, no verdict."""
        with s3_errors("PutObject", bucket, key, credentials=credentials):
            try:
                response = client.put_object(Bucket=bucket, Key=key, Body=body, **condition)
            except ClientError as exc:
                code = error_code(exc)
                if code in _PRECONDITION_FAILED or code in _NOT_IMPLEMENTED:
                    return None, code
                raise
        return response["ETag"], None

    try:
        etag, code = put(b'{"probe": 1}', IfNoneMatch="*")
        if code is not None:
            return f"a PutObject with If-None-Match: * of a new object s3://{bucket}/{key} answered {code}"
        _, code = put(b'{"probe": 2}', IfNoneMatch="*")
        if code is None:
            problems.append(
                "a PutObject with If-None-Match: * replaced an existing object instead of "
                "answering 412 Precondition Failed"
            )
            etag = None
        elif code not in _PRECONDITION_FAILED:
            problems.append(f"a PutObject with If-None-Match: * over an object answered {code}, not 412")
        new_etag, code = put(b'{"probe": 3}', IfMatch=_STALE_ETAG)
        if code is None:
            problems.append(
                "a PutObject with If-Match: <another ETag> replaced the object instead of "
                "answering 412 Precondition Failed"
            )
            etag = new_etag
        elif code not in _PRECONDITION_FAILED:
            problems.append(f"a PutObject with If-Match: <another ETag> answered {code}, not 412")
        if etag is not None and not problems:
            _, code = put(b'{"probe": 4}', IfMatch=etag)
            if code is not None:
                problems.append(f"a PutObject with If-Match: <the object's own ETag> was refused ({code})")
    finally:
        try:
            client.delete_object(Bucket=bucket, Key=key)
        except Exception as exc:  # noqa: BLE001 - the verdict matters more than the probe object
            log.warning("could not delete the conditional-write probe s3://%s/%s: %s", bucket, key, exc)
    return "; ".join(problems) or None


def _endpoint(client: S3Client) -> str:
    """The client's endpoint URL without any user info (for the cache key and messages)."""
    url = str(getattr(getattr(client, "meta", None), "endpoint_url", None) or f"client-{id(client)}")
    parts = urlsplit(url)
    if parts.username or parts.password:
        url = parts._replace(
            netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        ).geturl()
    return url
