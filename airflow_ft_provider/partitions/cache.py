"""Task-local recovery: a secondary copy of partition files on the worker's disk.

S3 is the primary copy and ground truth. A cached file is used only when its size and checksum match
the manifest; anything else (missing, truncated, corrupted, half-written) is ignored and repaired
from S3. Failing to write the cache never fails a commit or a read.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from .manifest import FileEntry, file_checksum

log = logging.getLogger(__name__)


class LocalPartitionCache:
    """Files under ``root/<bucket>/<key>``; keys are validated and attempt-specific, so never stale."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path(self, bucket: str, key: str) -> Path:
        path = self.root / bucket / key
        # Keys are validated by the layout; this guards against a bug ever writing outside the root.
        if not path.resolve().is_relative_to(self.root.resolve()):
            raise ValueError(f"cache path for s3://{bucket}/{key} escapes the cache root {self.root}")
        return path

    def lookup(self, bucket: str, key: str, entry: FileEntry) -> Path | None:
        """The cached file if it matches ``entry`` (size, then checksum), else None."""
        path = self.path(bucket, key)
        try:
            if path.stat().st_size != entry.size:
                return None
            if file_checksum(path, entry.checksum.partition(":")[0]) != entry.checksum:
                log.warning("cached copy of s3://%s/%s fails its checksum; reading from S3", bucket, key)
                return None
        except OSError:
            return None
        return path

    def temp_path(self, bucket: str, key: str) -> Path:
        """A fresh temporary file beside the final place, for a download that is then ``install``ed."""
        path = self.path(bucket, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        return Path(name)

    def install(self, temp: Path, bucket: str, key: str) -> Path:
        """Atomically move a verified download into place (a reader never sees a half-written file)."""
        path = self.path(bucket, key)
        os.replace(temp, path)
        return path

    def add(self, source: Path, bucket: str, key: str) -> None:
        """Best-effort copy of a local file that was just committed (the producer's secondary copy)."""
        try:
            temp = self.temp_path(bucket, key)
            try:
                try:
                    temp.unlink()
                    os.link(source, temp)
                except OSError:
                    shutil.copyfile(source, temp)
                self.install(temp, bucket, key)
            finally:
                temp.unlink(missing_ok=True)
        except OSError as exc:
            log.warning(
                "could not cache %s as s3://%s/%s: %s (the S3 copy is unaffected)", source, bucket, key, exc
            )

    def evict(self, bucket: str, prefix: str) -> None:
        """Forget everything under an S3 prefix (e.g. a released run)."""
        shutil.rmtree(self.path(bucket, prefix.rstrip("/") or "."), ignore_errors=True)

    def __repr__(self) -> str:
        return f"LocalPartitionCache({str(self.root)!r})"
