"""The part of a boto3 S3 client the partition store uses, as a Protocol: a typed seam (the store
needs no boto3 types at import, and a test may pass any object that answers these calls).

boto3 answers with JSON-shaped dicts (``Response``) that the store reads by key and checks where it
relies on a value; its transfers (``upload_file``, ``download_file``, ``copy``) take a
``TransferConfig``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

Response = dict[str, Any]  # boto3's answer: parsed XML as a dict, read by key


class ObjectBody(Protocol):
    """A GetObject answer's streaming body (botocore's ``StreamingBody``), read whole or by chunks."""

    def read(self, amt: int | None = None) -> bytes: ...

    def iter_chunks(self, chunk_size: int = ...) -> Iterator[bytes]: ...

    def __enter__(self) -> ObjectBody: ...

    def __exit__(self, *exc: object) -> None: ...


class Paginator(Protocol):
    def paginate(self, **request: str | int) -> Iterable[Response]: ...


class ClientMeta(Protocol):
    endpoint_url: str | None
    region_name: str | None


class S3Client(Protocol):
    meta: ClientMeta

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, **extra: str) -> Response: ...

    def get_object(self, *, Bucket: str, Key: str, **extra: str) -> Response: ...

    def head_object(self, *, Bucket: str, Key: str, **extra: str) -> Response: ...

    def delete_object(self, *, Bucket: str, Key: str, **extra: str) -> Response: ...

    def delete_objects(self, *, Bucket: str, Delete: Mapping[str, object]) -> Response: ...

    def list_objects_v2(self, *, Bucket: str, Prefix: str, MaxKeys: int = ...) -> Response: ...

    def abort_multipart_upload(self, *, Bucket: str, Key: str, UploadId: str) -> Response: ...

    def get_paginator(self, operation_name: str) -> Paginator: ...

    def can_paginate(self, operation_name: str) -> bool: ...

    def upload_file(self, Filename: str, Bucket: str, Key: str, *, Config: object = ...) -> None: ...

    def download_file(self, Bucket: str, Key: str, Filename: str, *, Config: object = ...) -> None: ...

    def copy(
        self, CopySource: Mapping[str, str], Bucket: str, Key: str, *, Config: object = ..., **extra: object
    ) -> None: ...

    def close(self) -> None: ...


ClientFactory = Callable[[], S3Client]
ClientOrFactory = S3Client | ClientFactory
"""What a store is built with: a client, or a zero-argument factory that makes one on first use."""
