"""Compare-and-swap of small JSON objects on S3, for state that many workers update (no lost update).

S3 conditional writes do the work: ``PutObject(IfNoneMatch='*')`` creates only if absent and
``PutObject(IfMatch=<etag>)`` replaces only the version that was read. A writer that loses the race
gets 412 (or 409 while another conditional write is in flight) and re-reads. Used for partition
manifests (fencing of zombie producers) and for any per-run state kept beside the partitions.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import DEFAULT_CREDENTIALS, MISSING_CODES, PartitionStoreError, error_code, s3_errors

MAX_OBJECT_BYTES = 1 << 20
# 412: the condition failed; 409: a concurrent conditional write is in progress (retry);
# NoSuchKey: IfMatch on an object that was deleted meanwhile.
CONFLICT_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}) | MISSING_CODES

T = TypeVar("T")


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
        client: Any,
        bucket: str,
        *,
        max_bytes: int = MAX_OBJECT_BYTES,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        credentials: str = DEFAULT_CREDENTIALS,
    ) -> None:
        self._client = client
        self.bucket = bucket
        self.credentials = credentials  # whose credentials, for error hints
        self.max_bytes = max_bytes
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
    def get(self, key: str) -> Versioned[Any] | None:
        raw = self.get_bytes(key)
        if raw is None:
            return None
        try:
            return Versioned(json.loads(raw.value.decode("utf-8")), raw.etag)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PartitionStoreError(
                f"s3://{self.bucket}/{key} is not valid JSON ({exc}); delete or repair it",
                bucket=self.bucket,
                key=key,
                code="InvalidJson",
                operation="GetObject",
            ) from None

    def create(self, key: str, value: Any) -> str:
        return self.put_bytes(key, _dump(value), etag=None)

    def replace(self, key: str, value: Any, etag: str) -> str:
        return self.put_bytes(key, _dump(value), etag=etag)

    def update(
        self, key: str, change: Callable[[Any | None], Any | None], *, max_attempts: int = 50
    ) -> Versioned[Any] | None:
        """Read-modify-write until no one else wrote in between; ``change`` may run several times.

        ``change(current)`` gets the current value (None when absent) and returns the new value, or
        None to leave the object as it is; it may raise to abort. Returns what is stored afterwards.
        """
        return self.update_raw(
            key,
            lambda raw: None if (new := change(_load(self.bucket, key, raw))) is None else _dump(new),
            max_attempts=max_attempts,
            decode=lambda data: json.loads(data.decode("utf-8")),
        )

    def update_raw(
        self,
        key: str,
        change: Callable[[bytes | None], bytes | None],
        *,
        max_attempts: int = 50,
        decode: Callable[[bytes], Any] = lambda data: data,
        oversized: str = "raise",
    ) -> Versioned[Any] | None:
        """``update`` on bytes, for callers with their own (validated) encoding such as manifests."""
        for attempt in range(max_attempts):
            current = self.get_bytes(key, oversized=oversized)
            new = change(None if current is None else current.value)
            if new is None:
                return None if current is None else Versioned(decode(current.value), current.etag)
            try:
                etag = self.put_bytes(key, new, etag=None if current is None else current.etag)
                return Versioned(decode(new), etag)
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

    def delete(self, key: str) -> None:
        with s3_errors("DeleteObject", self.bucket, key, credentials=self.credentials):
            self._client.delete_object(Bucket=self.bucket, Key=key)


def _dump(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _load(bucket: str, key: str, raw: bytes | None) -> Any | None:
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PartitionStoreError(
            f"s3://{bucket}/{key} is not valid JSON ({exc}); delete or repair it",
            bucket=bucket,
            key=key,
            code="InvalidJson",
            operation="GetObject",
        ) from None
