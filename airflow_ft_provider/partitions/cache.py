"""Task-local recovery: a secondary copy of partition files on the worker's disk.

S3 is the primary copy and ground truth. A cached file is used only when its size and checksum match
the manifest; anything else (missing, truncated, corrupted, half-written) is ignored and repaired
from S3. Failing to write the cache never fails a commit or a read.

The cache is bounded: ``trim`` (after every fetch and commit that added files) removes files older than
``max_age`` and then the least recently used ones until the cache holds at most ``max_bytes``. A file's
modification time is its last use (a hit touches it), so processes sharing the directory share one
order with no index to keep consistent. Files used in the last ``grace`` seconds are never removed: a
reader links a file it looked up into its try's directory within that time, and a link survives the
cache's removal of its name.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .manifest import FileEntry, file_checksum

log = logging.getLogger(__name__)


DEFAULT_MAX_BYTES = 10 << 30  # 10 GiB
DEFAULT_MAX_AGE = 7 * 86_400.0  # 7 days
GRACE = 300.0  # seconds a used file is kept whatever the bound


@dataclass(frozen=True)
class TrimResult:
    removed_files: int
    removed_bytes: int
    kept_bytes: int


class LocalPartitionCache:
    """Files under ``root/<bucket>/<key>``; keys are validated and attempt-specific, so never stale."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        max_age: float | None = DEFAULT_MAX_AGE,
        grace: float = GRACE,
    ) -> None:
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"the cache's size bound must be ≥ 0 bytes, got {max_bytes}")
        if max_age is not None and max_age <= 0:
            raise ValueError(f"the cache's age bound must be > 0 s, got {max_age}")
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.grace = grace

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
            os.utime(path)  # its last use: the least recently used files are trimmed first
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

    def trim(self) -> TrimResult:
        """Remove files older than ``max_age``, then the least recently used until at most
        ``max_bytes`` remain; files used within ``grace`` stay. Never raises (a cache is best effort)."""
        now = time.time()
        files: list[tuple[float, int, Path]] = []
        for folder, _, names in os.walk(self.root):
            for name in names:
                path = Path(folder) / name
                try:
                    stat = path.stat()
                except OSError:
                    continue
                files.append((stat.st_mtime, stat.st_size, path))
        files.sort()  # least recently used first
        total = sum(size for _, size, _ in files)
        removed = removed_bytes = 0
        for used_at, size, path in files:
            if now - used_at < self.grace:
                break  # sorted: every later file was used more recently still
            too_old = self.max_age is not None and now - used_at > self.max_age
            too_big = self.max_bytes is not None and total > self.max_bytes
            stale_temp = path.name.startswith(".")  # an interrupted download's temporary file
            if not (too_old or too_big or stale_temp):
                continue
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            removed += 1
            removed_bytes += size
        if removed:
            log.info(
                "partition cache %s: removed %d files (%d bytes), %d bytes kept", self.root, removed,
                removed_bytes, total,
            )  # fmt: skip
        return TrimResult(removed, removed_bytes, total)

    def evict(self, bucket: str, prefix: str) -> None:
        """Forget everything under an S3 prefix (e.g. a released run)."""
        shutil.rmtree(self.path(bucket, prefix.rstrip("/") or "."), ignore_errors=True)

    def __repr__(self) -> str:
        return f"LocalPartitionCache({str(self.root)!r}, max_bytes={self.max_bytes}, max_age={self.max_age})"
