"""Putting a new attempt's data files in the store: uploaded from the worker's disk, or copied inside S3
when the store holds their bytes already (a checkpoint's objects). Output that a restored checkpoint
left in the store is not on the disk at all: it is only copied.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import MISSING_CODES, PartitionStoreError, error_code
from .manifest import FileEntry, file_checksum
from .naming import attempt_dir, check_relative_path
from .s3_objects import StoreObjects
from .transfers import Transfers


@dataclass(frozen=True)
class StoredCopy:
    """An object of the store with a file's bytes (named by their SHA-256 in a checkpoint's copy)."""

    key: str
    size: int
    checksum: str  # "<algorithm>:<hex>", as a manifest records it


@dataclass(frozen=True)
class SourceFile:
    name: str  # inside the partition
    path: Path  # on the worker's disk, unless ``on_disk`` is False
    stored: StoredCopy | None  # the same bytes in the store: copied inside S3
    on_disk: bool = True


def source_files(source: Any, copy_from: Mapping[Path, StoredCopy]) -> list[SourceFile]:
    """The files to commit, sorted by name: a directory's (or a list of them), and with a directory the
    ``copy_from`` entries under it that are only in the store."""
    if not isinstance(source, (str, os.PathLike)):
        return sorted(
            (SourceFile(name, path, copy_from.get(path)) for name, path in _listed(source)),
            key=lambda f: f.name,
        )
    root = Path(source)
    if not root.is_dir():
        raise ValueError(f"commit source {root} is not a directory; pass a directory or a list of files")
    files = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(("_", ".")) for part in rel.parts) or not path.is_file():
            continue
        files.append(SourceFile(check_relative_path("file name", rel.as_posix()), path, copy_from.get(path)))
    for path, stored in copy_from.items():
        if not path.is_relative_to(root) or path.exists():
            continue
        rel = path.relative_to(root)
        if not any(part.startswith(("_", ".")) for part in rel.parts):
            files.append(SourceFile(check_relative_path("file name", rel.as_posix()), path, stored, False))
    return sorted(files, key=lambda f: f.name)


def _listed(source: Any) -> list[tuple[str, Path]]:
    files = []
    seen: set[str] = set()
    for item in source:
        path = Path(item)
        if not path.is_file():
            raise ValueError(f"commit source file {path} does not exist or is not a regular file")
        name = check_relative_path("file name", path.name)
        if name in seen:
            raise ValueError(
                f"two commit source files are named {name!r}; names must be unique in a partition"
            )
        seen.add(name)
        files.append((name, path))
    return files


def _missing(future: Any) -> bool:
    """Whether a finished transfer failed because its source object does not exist."""
    try:
        future.result()
    except Exception as exc:  # noqa: BLE001 - only a missing source is told apart here
        return error_code(exc) in MISSING_CODES
    return False


class AttemptUploads:
    """Uploads of an attempt's files, in parallel, each hashed as it goes up."""

    def __init__(self, objects: StoreObjects) -> None:
        self.objects = objects

    def _upload(self, files: list[SourceFile], prefix: str, attempt_id: str) -> list[FileEntry]:
        """Every file under ``prefix`` + the attempt's directory, in parallel; their manifest entries."""
        from boto3.s3.transfer import create_transfer_manager

        keys = [f"{attempt_dir(attempt_id)}{f.name}" for f in files]
        sizes = [f.path.stat().st_size if f.on_disk else _stored(f).size for f in files]
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="ft-hash") as hashers:
            checksums = [
                hashers.submit(file_checksum, f.path, self.objects.checksum) if f.on_disk else None
                for f in files
            ]
            transfers = Transfers(create_transfer_manager(self.objects.client, self.objects.transfer_config))
            with transfers.manager:
                copies = {i: f.stored for i, f in enumerate(files)}
                for i, file in enumerate(files):
                    self._transfer(transfers, i, file, copies[i], prefix + keys[i], sizes[i])
                uploaded = 0
                while uploaded < len(files):
                    i, future = transfers.done.get()
                    stored = copies[i]
                    if stored is not None and _missing(future):  # the copy's source is gone: upload
                        if not files[i].on_disk:
                            raise self._gone(files[i].name, stored)
                        copies[i] = None
                        self._transfer(transfers, i, files[i], None, prefix + keys[i], sizes[i])
                        continue
                    with self.objects.s3_errors("PutObject", prefix + keys[i]):
                        future.result()
                    uploaded += 1
                    self.objects.step("file_uploaded", uploaded=uploaded, total=len(files), key=keys[i])
            self.objects.step("files_uploaded", total=len(files))
            entries = [
                FileEntry(keys[i], sizes[i], checksum.result() if checksum else _stored(files[i]).checksum)
                for i, checksum in enumerate(checksums)
            ]
        for file, entry in zip(files, entries, strict=True):
            if file.on_disk and file.path.stat().st_size != entry.size:
                raise RuntimeError(
                    f"{file.path} changed size while it was being committed; finish writing it first"
                )
        return entries

    def _gone(self, name: str, stored: StoredCopy) -> PartitionStoreError:
        return PartitionStoreError(
            f"{name} of this output is only in the store, as {stored.key}, and that object is gone "
            "(deleted by hand, or by a lifecycle rule): nothing was published; clear the task to "
            "compute the stage again",
            bucket=self.objects.bucket,
            key=stored.key,
            code="NoSuchKey",
            operation="CopyObject",
        )

    def _transfer(
        self,
        transfers: Transfers,
        tag: int,
        file: SourceFile,
        stored: StoredCopy | None,
        key: str,
        size: int,
    ) -> None:
        if stored is not None:  # the same bytes are in the store: copied inside S3
            transfers.manager.copy(
                {"Bucket": self.objects.bucket, "Key": self.objects.inside_store(stored.key)},
                self.objects.bucket,
                key,
                subscribers=[transfers.subscriber(tag, size)],
            )
        else:
            transfers.manager.upload(
                str(file.path), self.objects.bucket, key, subscribers=[transfers.subscriber(tag)]
            )


def _stored(file: SourceFile) -> StoredCopy:
    assert file.stored is not None, f"{file.name}: neither on disk nor in the store"
    return file.stored
