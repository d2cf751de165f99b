"""Reading a committed partition: through its manifest only, every file checked (size, checksum)."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..spark.checksums import new_hasher
from .errors import (
    MISSING_CODES,
    PartitionNotFound,
    Unavailable,
    error_code,
)
from .manifest import (
    FileEntry,
    Manifest,
)
from .naming import (
    PartitionRef,
    attempt_dir,
)
from .s3_objects import StoreObjects, _Location
from .transfers import Transfers

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchedPartition:
    """A partition's files on local disk, in manifest order, verified against the manifest."""

    manifest: Manifest
    paths: tuple[Path, ...]
    cache_hits: int = 0
    downloaded: int = 0


class _HashingWriter:
    """A write-only file target that counts and checksums bytes on their way to disk.

    The file is opened on the first write, so a partition of thousands of files does not hold
    thousands of descriptors while its downloads wait in the queue.
    """

    def __init__(self, path: Path, checksum: str | None) -> None:
        self._path = path
        self._file: Any = None
        self._closed = False
        self._hasher = new_hasher(checksum) if checksum else None
        self._algorithm = checksum.partition(":")[0] if checksum else ""
        self.size = 0

    def write(self, data: bytes) -> int:
        if self._file is None:
            self._file = open(self._path, "wb")  # noqa: SIM115 - closed by close()
        if self._hasher is not None:
            self._hasher.update(data)
        self.size += len(data)
        return self._file.write(data)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._file is None:
            self._path.touch()  # an empty object: no write ever came
        else:
            self._file.close()

    def problem(self, entry: FileEntry) -> tuple[Unavailable, str] | None:
        if self.size != entry.size:
            return Unavailable.SIZE_MISMATCH, f"{entry.key} is {self.size} bytes, manifest says {entry.size}"
        if self._hasher is not None:
            actual = f"{self._algorithm}:{self._hasher.hexdigest()}"
            if actual != entry.checksum:
                return (
                    Unavailable.CHECKSUM_MISMATCH,
                    f"{entry.key} has {actual}, manifest says {entry.checksum}",
                )
        return None


def _inside(root: Path, name: str) -> Path:
    """``root / name``, refused when it resolves outside ``root``."""
    path = root / name
    resolved, base = path.resolve(), root.resolve()
    if not resolved.is_relative_to(base):
        raise ValueError(
            f"refusing to write partition file {name!r} to {path}: it resolves to {resolved}, outside {base} "
            "(a symlink in the destination?); remove it or fetch into an empty directory"
        )
    return path


class PartitionReads:
    """Read protocol: ``fetch`` (local files, optionally cached) and ``remote_files`` (``s3://`` URIs)."""

    def __init__(self, objects: StoreObjects) -> None:
        self.objects = objects

    def remote_files(
        self, ref: PartitionRef, *, execution_id: str | None = None
    ) -> tuple[Manifest, list[str]]:
        """The partition's data objects as ``s3://`` URIs, for readers that read S3 themselves (Spark
        with s3a), verified without a download: one LIST shows each object with the size and the ETag
        the manifest recorded at commit (any rewrite, even to the same size, changes the ETag). An
        object the manifest has no ETag for (older manifests) is read once and its checksum compared.
        Raises PartitionNotFound like fetch()."""
        loc = self.objects.location(ref, execution_id)
        manifest = self.objects.read_manifest(loc)
        listed = self.objects.list_under(loc.prefix + attempt_dir(manifest.attempt_id))
        for entry in manifest.files:
            key = loc.prefix + entry.key
            found = listed.get(key)
            if found is None:
                raise PartitionNotFound(
                    ref.partition_id,
                    Unavailable.MISSING_OBJECT,
                    f"s3://{self.objects.bucket}/{key} is gone",
                    run=str(ref.run),
                )
            if found.size != entry.size:
                raise PartitionNotFound(
                    ref.partition_id,
                    Unavailable.SIZE_MISMATCH,
                    f"s3://{self.objects.bucket}/{key} has {found.size} bytes, the manifest {entry.size}",
                    run=str(ref.run),
                )
            if entry.etag is not None:
                if found.etag == entry.etag:
                    continue
                problem = f"its ETag is {found.etag}, the manifest's {entry.etag}: rewritten since its commit"
            else:
                actual = self._stored_checksum(key, entry.checksum)
                if actual == entry.checksum:
                    continue
                problem = f"its checksum is {actual}, the manifest's {entry.checksum}"
            raise PartitionNotFound(
                ref.partition_id,
                Unavailable.CHECKSUM_MISMATCH,
                f"s3://{self.objects.bucket}/{key}: {problem}",
                run=str(ref.run),
            )
        return manifest, [f"s3://{self.objects.bucket}/{loc.prefix}{entry.key}" for entry in manifest.files]

    def _stored_checksum(self, key: str, checksum: str) -> str:
        """The checksum (with the algorithm of ``checksum``) of an object's bytes, read from S3."""
        hasher = new_hasher(checksum)
        with self.objects.s3_errors("GetObject", key):
            body = self.objects.client.get_object(Bucket=self.objects.bucket, Key=key)["Body"]
            for chunk in iter(lambda: body.read(1 << 20), b""):
                hasher.update(chunk)
        return f"{checksum.partition(':')[0]}:{hasher.hexdigest()}"

    def fetch(
        self,
        ref: PartitionRef,
        dest: str | os.PathLike[str] | None = None,
        *,
        verify: bool = True,
        execution_id: str | None = None,
        skip: Collection[str] = (),
    ) -> FetchedPartition:
        """The partition's files on local disk, each checked against the manifest (size, checksum);
        but the files named in ``skip`` (a resumed checkpointed stage processed them already).

        With a local cache, verified cached files are used and anything else is downloaded from S3
        and repaired in the cache; ``dest`` (a directory) then gets a copy under the files' names.
        Raises PartitionNotFound when the partition is missing or fails its integrity check. With
        ``execution_id``: the pipelined partition that region execution wrote.
        """
        loc = self.objects.location(ref, execution_id)
        return self._fetch(loc, self.objects.read_manifest(loc), dest, verify, skip)

    def _fetch(
        self, loc: _Location, manifest: Manifest, dest: Any, verify: bool, skip: Collection[str] = ()
    ) -> FetchedPartition:
        from boto3.s3.transfer import create_transfer_manager

        if dest is None and self.objects.cache is None:
            raise ValueError("fetch needs dest= (a directory) when the store has no local cache")
        dest_dir = Path(dest) if dest is not None else None
        # Checked before anything is written: every file lands inside dest (names are validated, but
        # a symlink already in dest could still point elsewhere).
        wanted = [entry for entry in manifest.files if entry.name not in skip]
        targets = [_inside(dest_dir, entry.name) for entry in wanted] if dest_dir is not None else []
        paths: list[Path | None] = [None] * len(wanted)
        todo: list[tuple[int, FileEntry, str, Path]] = []
        hits = 0
        for i, entry in enumerate(wanted):
            key = loc.prefix + entry.key
            if self.objects.cache is not None:
                cached = self.objects.cache.lookup(self.objects.bucket, key, entry)
                if cached is not None:
                    paths[i] = cached
                    hits += 1
                    continue
                temp = self.objects.cache.temp_path(self.objects.bucket, key)
            else:
                final = targets[i]
                final.parent.mkdir(parents=True, exist_ok=True)
                temp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
            todo.append((i, entry, key, temp))

        writers = [_HashingWriter(temp, entry.checksum if verify else None) for _, entry, _, temp in todo]
        try:
            if todo:
                transfers = Transfers(
                    create_transfer_manager(self.objects.client, self.objects.transfer_config)
                )
                with transfers.manager:
                    for n, (_, entry, key, _) in enumerate(todo):
                        # A write-only target makes s3transfer hand over the bytes in order, so they
                        # are checksummed as they arrive instead of being read back from disk.
                        transfers.manager.download(
                            self.objects.bucket,
                            key,
                            writers[n],
                            subscribers=[transfers.subscriber(n, entry.size)],
                        )
                    for _ in todo:
                        n, future = transfers.done.get()
                        self._download_result(loc, todo[n][2], future)
                        writers[n].close()
                        problem = writers[n].problem(todo[n][1])
                        if problem is not None:
                            raise PartitionNotFound(
                                loc.ref.partition_id, problem[0], problem[1], run=str(loc.ref.run)
                            )
            for i, _, key, temp in todo:
                if self.objects.cache is not None:
                    paths[i] = self.objects.cache.install(temp, self.objects.bucket, key)
                else:
                    paths[i] = targets[i]
                    os.replace(temp, targets[i])
        finally:
            for writer, (_, _, _, temp) in zip(writers, todo, strict=True):
                writer.close()
                temp.unlink(missing_ok=True)
        if todo and self.objects.cache is not None:
            self.objects.cache.trim()  # bounded: what was just added may push older files out

        if dest_dir is not None and self.objects.cache is not None:
            for i, target in enumerate(targets):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.unlink(missing_ok=True)
                try:
                    os.link(paths[i], target)  # type: ignore[arg-type]
                except OSError:
                    shutil.copyfile(paths[i], target)  # type: ignore[arg-type]
                paths[i] = target
        return FetchedPartition(manifest, tuple(p for p in paths if p is not None), hits, len(todo))

    def _download_result(self, loc: _Location, key: str, future: Any) -> None:
        from botocore.exceptions import ClientError

        with self.objects.s3_errors("GetObject", key):
            try:
                future.result()
            except ClientError as exc:
                code = error_code(exc)
                if code in MISSING_CODES:
                    reason, what = Unavailable.MISSING_OBJECT, "is gone"
                elif code in ("InvalidRange", "416"):
                    reason, what = Unavailable.SIZE_MISMATCH, "is shorter than the manifest says"
                else:
                    raise
                detail = f"s3://{self.objects.bucket}/{key} {what}"
                raise PartitionNotFound(loc.ref.partition_id, reason, detail, run=str(loc.ref.run)) from None
