"""What a checkpoint knows of a task's local files: their size, SHA-256 and rows (hashed once per file
version), which of them are output data a restore may leave in the store, and where a carried file is
noted (``spark/carried.py``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from airflow_ft_provider.checkpoints.snapshot import CheckpointFile
from airflow_ft_provider.spark.carried import BATCH_DIR, carried

_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileFacts:
    size: int
    sha256: str
    rows: int | None  # an output file's (its Parquet footer); None for Spark's own files


@dataclass
class FileHashes:
    """What is known of the local files already looked at, by (path, size, mtime): a checkpoint hashes
    only the files written since the previous one."""

    known: dict[tuple[str, int, int], FileFacts] = field(default_factory=dict)

    def of(self, path: Path, *, output: bool = False) -> FileFacts:
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key not in self.known:
            self.known[key] = FileFacts(stat.st_size, sha256_of(path), parquet_rows(path) if output else None)
        return self.known[key]


def output_data(path: str) -> bool:
    """Whether a checkpoint file is output data (``out/<result>/...``), not the file sink's
    ``_spark_metadata`` log, which Spark reads, nor a hidden file."""
    parts = path.split("/")
    return len(parts) >= 3 and parts[0] == "out" and not parts[2].startswith(("_", "."))


def may_stay(file: CheckpointFile) -> bool:
    """Whether a restore may leave the file in the store: output data of known rows."""
    return output_data(file.path) and not file.compressed and file.rows is not None


def noted_in(path: str) -> tuple[str, str]:
    """The directory whose note lists an output file (its micro-batch's, or the output's own for the
    file sink's flat layout), and its name there."""
    parts = path.split("/")
    split = 3 if len(parts) >= 4 and BATCH_DIR.match(parts[2]) else 2
    return "/".join(parts[:split]), "/".join(parts[split:])


def carried_files(task_dir: Path, through: int | None) -> list[CheckpointFile]:
    """The output files of batches up to ``through`` (all: None) that a restore left in the store."""
    files = []
    out = task_dir / "out"
    for result in sorted(out.iterdir()) if out.is_dir() else ():
        for path, kept in carried(result, through=through).items():
            relative = path.relative_to(task_dir).as_posix()
            files.append(CheckpointFile(relative, kept.size, kept.sha256, False, kept.rows))
    return files


def parquet_rows(path: Path) -> int | None:
    """The rows a Parquet file's footer counts; None if it cannot be read (a restore then fetches it)."""
    try:
        import pyarrow.parquet as pq

        return int(pq.read_metadata(path).num_rows)
    except Exception:  # noqa: BLE001 - no pyarrow, or not Parquet: the file is restored as bytes
        return None


def object_name(file: CheckpointFile) -> str:
    return file.sha256 + (".gz" if file.compressed else "")


def sha256_of(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(_CHUNK):
            hasher.update(chunk)
    return hasher.hexdigest()
