"""Deleting what a failed commit or an ended run left: an attempt's objects, unfinished multipart uploads.

Best-effort or bounded by age: what stays behind is an orphan that orphan clean-up
(``PartitionRetention.cleanup_orphans``) removes later; no reader ever sees it (no manifest names it)."""

from __future__ import annotations

import logging

from .errors import error_code
from .s3_objects import StoreObjects

log = logging.getLogger(__name__)


def delete_quietly(objects: StoreObjects, prefix: str) -> None:
    """Best effort after a failed commit; orphan clean-up removes whatever is left."""
    try:
        objects.delete_batch(list(objects.list_under(prefix)))
    except Exception as exc:  # noqa: BLE001 - the original error matters more
        log.warning(
            "could not remove data of failed commit under s3://%s/%s: %s", objects.bucket, prefix, exc
        )


def abort_uploads(
    objects: StoreObjects, prefix: str, *, older_than: float | None, keep_prefixes: tuple[str, ...] = ()
) -> list[str]:
    aborted = []
    with objects.s3_errors("ListMultipartUploads", prefix):
        pages = objects.client.get_paginator("list_multipart_uploads").paginate(
            Bucket=objects.bucket, Prefix=prefix
        )
        uploads = [u for page in pages for u in page.get("Uploads", ())]
    for upload in uploads:
        if older_than is not None and upload["Initiated"].timestamp() > older_than:
            continue
        if upload["Key"].startswith(keep_prefixes) and keep_prefixes:
            continue
        with objects.s3_errors("AbortMultipartUpload", upload["Key"]):
            try:
                objects.client.abort_multipart_upload(
                    Bucket=objects.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                )
            except Exception as exc:
                if error_code(exc) != "NoSuchUpload":
                    raise
        aborted.append(upload["Key"])
    return aborted
