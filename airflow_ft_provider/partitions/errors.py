"""Typed errors of the partition store.

``PartitionNotFound`` is Flink's PartitionNotFoundException: the failover logic treats the named
partition as unavailable and backtracks to its producer. ``PartitionStoreError`` is everything else S3
said no to; it names bucket, key and S3 error code, never credentials or presigned URLs.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator


class Unavailable(str, enum.Enum):
    """Why a partition cannot be consumed (again)."""

    MISSING_MANIFEST = "missing manifest"
    INVALID_MANIFEST = "invalid manifest"
    MISSING_OBJECT = "missing object"
    SIZE_MISMATCH = "size mismatch"
    CHECKSUM_MISMATCH = "checksum mismatch"
    PIPELINED = "pipelined"  # never available after a failure of its region
    RELEASED = "released"

    def __str__(self) -> str:
        return self.value

    @property
    def corrupt(self) -> bool:
        """Its objects are there but wrong (a damaged manifest or data), rather than missing or released."""
        return self in (
            Unavailable.INVALID_MANIFEST,
            Unavailable.SIZE_MISMATCH,
            Unavailable.CHECKSUM_MISMATCH,
        )


class PartitionNotFound(Exception):
    """An input partition is missing, incomplete or failed its integrity check.

    ``partition_id`` uses the failover core's ids (``result`` or ``result[i]``), so it can be passed
    straight into ``FailoverStrategy.tasks_to_restart(..., unavailable=[...])``.
    """

    def __init__(self, partition_id: str, reason: Unavailable, detail: str = "", *, run: str = "") -> None:
        self.partition_id = partition_id
        self.reason = reason
        self.detail = detail
        self.run = run
        where = f" of run {run}" if run else ""
        message = f"partition {partition_id!r}{where} is unavailable: {reason.value}"
        super().__init__(f"{message} ({detail})" if detail else message)


class PartitionStoreError(Exception):
    """S3 refused or failed a request; carries bucket, key, S3 error code and the operation."""

    def __init__(
        self,
        message: str,
        *,
        bucket: str,
        key: str | None = None,
        code: str | None = None,
        operation: str | None = None,
    ) -> None:
        self.bucket = bucket
        self.key = key
        self.code = code
        self.operation = operation
        super().__init__(message)


class StaleCommitError(Exception):
    """A commit lost to a newer try of the same producer (a zombie worker); nothing was replaced."""

    def __init__(
        self, partition_id: str, try_number: int, committed_try: int, committed_attempt: str
    ) -> None:
        self.partition_id = partition_id
        self.try_number = try_number
        self.committed_try = committed_try
        self.committed_attempt = committed_attempt
        super().__init__(
            f"commit of partition {partition_id!r} by try {try_number} rejected: try {committed_try} "
            f"(attempt {committed_attempt}) already committed it; an older try must not replace a newer "
            "one, so this worker is stale and its output was discarded"
        )


class ReleaseRefused(Exception):
    """A release was asked for while a registered consumer still needs the partitions."""

    def __init__(self, run: str, consumers: list[str], partitions: list[str] | None = None) -> None:
        self.run = run
        self.consumers = consumers
        self.partitions = partitions
        what = "all partitions" if partitions is None else f"partitions {partitions}"
        super().__init__(
            f"not releasing {what} of run {run}: still needed by registered consumer(s) {consumers}; "
            "unregister them (or let their leases expire) first"
        )


class ConsumerRegistrationRefused(Exception):
    """A consumer tried to register on partitions that are being or have been released."""


# Error codes that mean "the object is not there" (S3 returns 404 with either, HEAD has no body).
MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})

_HINTS = {
    "NoSuchBucket": "create the bucket or fix the bucket in the partition store URL",
    "InvalidAccessKeyId": "check the access key of {credentials}",
    "SignatureDoesNotMatch": "check the secret key of {credentials}",
    "AccessDenied": "grant s3:GetObject, s3:PutObject, s3:DeleteObject and s3:ListBucket on the prefix",
    "EndpointConnectionError": "check endpoint_url in the extra of {credentials} and that the endpoint is up",
    "NoCredentialsError": "set login/password on {credentials} or configure the standard AWS chain",
}
DEFAULT_CREDENTIALS = "the AWS connection"


def error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if code:
            return str(code)
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return str(status) if status else None
    return None


@contextlib.contextmanager
def s3_errors(
    operation: str, bucket: str, key: str | None = None, *, credentials: str = DEFAULT_CREDENTIALS
) -> Iterator[None]:
    """Turn botocore errors into PartitionStoreError naming bucket, key and S3 code, never a credential.
    ``credentials`` says whose credentials were used (e.g. "the AWS connection 'lake'"), for the hint."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        code = error_code(exc) or "Unknown"
        detail = exc.response.get("Error", {}).get("Message", "")
        raise _store_error(operation, bucket, key, code, detail, credentials) from exc
    except BotoCoreError as exc:
        code = type(exc).__name__
        # EndpointConnectionError etc. carry the endpoint URL, never credentials or a signed URL.
        raise _store_error(operation, bucket, key, code, str(exc), credentials) from exc


def _store_error(
    operation: str, bucket: str, key: str | None, code: str, detail: str, credentials: str
) -> PartitionStoreError:
    where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    hint = _HINTS[code].format(credentials=credentials) if code in _HINTS else None
    message = f"S3 {operation} on {where} failed with {code}"
    if detail:
        message += f": {detail}"
    if hint:
        message += f" ({hint})"
    return PartitionStoreError(message, bucket=bucket, key=key, code=code, operation=operation)
