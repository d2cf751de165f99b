"""Committing a partition: data files under a new attempt, then the manifest in one conditional PUT.

A partition becomes visible only when its manifest is written, so a crash at any point leaves the old
state or the new one, never a partial partition. The producer's try number fences zombies: a commit
never replaces a manifest of a newer try.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .deletion import abort_uploads, delete_quietly
from .errors import (
    StaleCommitError,
)
from .external_writes import ExternalWrites
from .manifest import (
    MAX_MANIFEST_BYTES,
    FileEntry,
    InvalidManifest,
    Manifest,
    Producer,
    check_codec,
    with_etags,
)
from .naming import (
    PartitionRef,
    attempt_dir,
    check_name,
)
from .provenance import UNKNOWN, Provenance
from .s3_objects import StoreObjects, _Location
from .upload import AttemptUploads, StoredCopy, source_files

log = logging.getLogger(__name__)


def new_attempt_id(try_number: int) -> str:
    """A unique attempt id that also says which try of the producer wrote it."""
    return f"t{try_number}-{uuid.uuid4().hex[:16]}"


class PartitionCommits:
    """Commit protocol: ``commit`` (local files) and ``commit_uploaded`` (files another writer put)."""

    def __init__(self, objects: StoreObjects) -> None:
        self.objects = objects
        self.uploads = AttemptUploads(objects)
        self.external = ExternalWrites(objects)

    def commit(
        self,
        ref: PartitionRef,
        source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        *,
        producer: Producer,
        format: str = "parquet",
        compression: str = "snappy",
        row_count: int | None = None,
        execution_id: str | None = None,
        copy_from: Mapping[Path, StoredCopy] | None = None,
        provenance: Provenance = UNKNOWN,
    ) -> Manifest:
        """Upload a directory (or list) of files as partition ``ref`` and publish its manifest: a
        blocking partition, or with ``execution_id`` the pipelined (scratch) partition of that region
        execution, which no other execution may read.

        ``copy_from``: files whose content is already in this store (an object with the same bytes,
        e.g. a checkpoint's copy): copied inside S3 instead of uploaded again; an entry under the source
        directory that is not on disk (output a restored checkpoint left in the store) is committed too.

        In a directory, names starting with '_' or '.' (``_SUCCESS``, ``.crc``, ``_temporary``) are
        skipped, as Spark and Hadoop do. Raises StaleCommitError when a newer try already committed.
        """
        loc = self.objects.location(ref, execution_id)
        return self._commit(
            loc, source, producer, format, compression, row_count, copy_from or {}, provenance
        )

    def _commit(
        self,
        loc: _Location,
        source: Any,
        producer: Producer,
        fmt: str,
        compression: str,
        row_count: int | None,
        copy_from: Mapping[Path, StoredCopy],
        provenance: Provenance,
    ) -> Manifest:
        if not isinstance(producer, Producer):
            raise ValueError(f"producer must be a Producer(task_id, map_index, try_number), got {producer!r}")
        check_codec("format", fmt)
        check_codec("compression", compression)
        if row_count is not None and (
            isinstance(row_count, bool) or not isinstance(row_count, int) or row_count < 0
        ):
            raise ValueError(f"row_count must be None or an integer ≥ 0, got {row_count!r}")
        files = source_files(source, copy_from)
        attempt_id = new_attempt_id(producer.try_number)
        manifest = self._publish_attempt(
            loc,
            attempt_id,
            lambda: self.uploads._upload(files, loc.prefix, attempt_id),
            producer,
            fmt,
            compression,
            row_count,
            provenance,
        )
        if self.objects.cache is not None:
            for file, entry in zip(files, manifest.files, strict=True):
                if file.on_disk:
                    self.objects.cache.add(file.path, self.objects.bucket, loc.prefix + entry.key)
            self.objects.cache.trim()
        return manifest

    def attempt_location(self, ref: PartitionRef, attempt_id: str, *, execution_id: str | None = None) -> str:
        """``s3://`` prefix where a writer that talks to S3 itself (Spark with s3a) puts an attempt's
        files; with ``execution_id``, of the pipelined (scratch) partition of that execution."""
        prefix = self.objects.location(ref, execution_id).prefix
        return f"s3://{self.objects.bucket}/{prefix}{attempt_dir(check_name('attempt id', attempt_id))}"

    def commit_uploaded(
        self,
        ref: PartitionRef,
        attempt_id: str,
        *,
        producer: Producer,
        format: str = "parquet",
        compression: str = "snappy",
        row_count: int | None = None,
        execution_id: str | None = None,
        provenance: Provenance = UNKNOWN,
        recorded: bool = False,
    ) -> Manifest:
        """Publish the files another writer already put under ``attempt_location(ref, attempt_id)``.

        ``recorded``: the executors' writer listed them in ``_ft_written.json`` with their sizes,
        checksums and rows (``spark/written.py``), so no byte is read: each listed object is checked
        by one LIST, objects the record does not list (a lost task attempt's) are left out, and the
        row count is the record's. Otherwise each object is read back once to checksum it (S3 ETags of
        multipart uploads are not content hashes); names starting with '_' or '.' are skipped, as
        Hadoop does. Same fencing as commit(). A file name readers would reject is a ValueError before
        anything is published or deleted.
        """
        loc = self.objects.location(ref, execution_id)
        attempt_prefix = loc.prefix + attempt_dir(attempt_id)
        if recorded:
            files = self.external.written_record(attempt_prefix)
            rows = sum(f.rows for f in files)
            if row_count is not None and row_count != rows:
                raise ValueError(
                    f"{ref}: the application reported {row_count} rows, the executors' record {rows}"
                )
            return self._publish_attempt(
                loc,
                attempt_id,
                lambda: self.external.recorded_entries(attempt_prefix, attempt_id, files),
                producer,
                format,
                compression,
                rows,
                provenance,
            )
        objects = self.external.uploaded_objects(attempt_prefix)
        return self._publish_attempt(
            loc,
            attempt_id,
            lambda: self.external.checksum_uploaded(loc.prefix, attempt_id, objects),
            producer,
            format,
            compression,
            row_count,
            provenance,
        )

    def discard_uploaded(
        self, ref: PartitionRef, attempt_id: str, *, execution_id: str | None = None
    ) -> None:
        """Remove what a writer put under an attempt that is never committed (its try failed), and its
        unfinished multipart uploads: no manifest names it, so no reader saw it. Best effort: orphan
        clean-up removes whatever is left."""
        prefix = self.objects.location(ref, execution_id).prefix + attempt_dir(
            check_name("attempt id", attempt_id)
        )
        delete_quietly(self.objects, prefix)
        try:
            abort_uploads(self.objects, prefix, older_than=None)
        except Exception as exc:  # noqa: BLE001 - the try's own failure matters more
            log.warning("could not abort uploads under s3://%s/%s: %s", self.objects.bucket, prefix, exc)

    def recorded_rows(self, ref: PartitionRef, attempt_id: str) -> int | None:
        """The rows of an attempt the executors wrote, once Spark's driver recorded it (the job
        committed); None while there is no record (still running, failed, or never started)."""
        prefix = self.objects.location(ref, None).prefix + attempt_dir(check_name("attempt id", attempt_id))
        files = self.external.read_written_record(prefix)
        return None if files is None else sum(f.rows for f in files)

    def _publish_attempt(
        self,
        loc: _Location,
        attempt_id: str,
        write_files: Callable[[], list[FileEntry]],
        producer: Producer,
        fmt: str,
        compression: str,
        row_count: int | None,
        provenance: Provenance,
    ) -> Manifest:
        """Write (or checksum) an attempt's files, then publish its manifest; a failure before the
        manifest PUT removes the attempt's data, a stale try's too."""
        attempt_prefix = loc.prefix + attempt_dir(attempt_id)
        self.objects.require_conditional_writes()  # before any data goes up: the manifest PUT needs it
        publishing = False
        try:
            entries = write_files()
            if any(entry.etag is None for entry in entries):  # not taken from a LIST of the attempt yet
                listed = self.objects.list_under(
                    attempt_prefix
                )  # the ETags readers that leave the bytes to Spark compare
                entries = with_etags(entries, {k: o.etag for k, o in listed.items()}, loc.prefix)
            manifest = Manifest(
                pipeline=loc.ref.pipeline,
                run_id=loc.ref.run_id,
                result=loc.ref.result,
                map_index=loc.ref.map_index,
                kind=loc.kind,
                attempt_id=attempt_id,
                producer=producer,
                files=tuple(entries),
                format=fmt,
                compression=compression,
                row_count=row_count,
                created_at=round(self.objects.clock.now(), 3),  # what the manifest keeps (ms)
                provenance=provenance,
            )
            publishing = True
            self._publish(loc, manifest)
            self.objects.step("after_manifest_put", attempt_id=attempt_id)
        except StaleCommitError:
            delete_quietly(self.objects, attempt_prefix)
            raise
        except BaseException:
            # If the manifest PUT itself failed, S3 may still have applied it (a lost response);
            # then the data is live, so leave it to cleanup_orphans, which checks the manifest.
            if not publishing:
                delete_quietly(self.objects, attempt_prefix)
            raise
        log.info(
            "committed partition %s (%s, %d files, %d bytes, attempt %s)",
            loc.ref,
            loc.kind,
            len(entries),
            manifest.total_size,
            attempt_id,
        )
        return manifest

    def _publish(self, loc: _Location, manifest: Manifest) -> None:
        data = manifest.to_json()
        rounds = 0

        def change(current: bytes | None) -> bytes:
            nonlocal rounds
            rounds += 1
            if current is not None:
                try:
                    existing = Manifest.from_json(current, expected=loc.ref, kind=loc.kind)
                except InvalidManifest as exc:
                    log.warning("replacing invalid manifest of %s: %s", loc.ref, exc)
                else:
                    if existing.producer.try_number > manifest.producer.try_number:
                        raise StaleCommitError(
                            loc.ref.partition_id,
                            manifest.producer.try_number,
                            existing.producer.try_number,
                            existing.attempt_id,
                        )
            self.objects.step(
                "before_manifest_put",
                attempt_id=manifest.attempt_id,
                round=rounds,
                replaces=current is not None,
            )
            return data

        # An oversized object at the manifest key is invalid like any other: read its head, replace it.
        self.objects.conditional_objects(max_bytes=MAX_MANIFEST_BYTES).update_raw(
            loc.manifest_key, change, oversized="truncate"
        )
