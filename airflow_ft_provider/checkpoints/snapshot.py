"""What one completed checkpoint is made of, and its ``_metadata`` (the document that makes it complete).

Checkpoint *k* is the state after micro-batch *k* committed: the files of the task-local directory
that Spark needs to resume after batch *k* (its ``metadata``, the offsets, commits and file-source logs
up to *k*, the state store up to version *k+1*) and the output of batches 0..*k*: in append mode the
files Spark's file sink committed (its ``_spark_metadata`` log up to *k* names them, ``spark/sink_log.py``),
in complete mode the newest ``bNNNNNNNNNN`` directory ``foreachBatch`` wrote. Spark writes each
of them once, atomically (a hidden temporary file renamed), so a file listed here is complete; files
of the batch in flight (numbered above *k*) and temporaries are not part of it.

After a restore on another worker, the output of batches 0..*k* may be only in the store: the batch
directories hold notes of it instead (``spark/carried.py``), and every later checkpoint lists it too.

The store's copy keeps each file once, named by its SHA-256 (``objects/<sha256>``): a file shared by
many checkpoints (the logs of early batches, the output of early batches) is uploaded once, which
makes every checkpoint after the first incremental. ``_metadata`` lists them and is written last.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from airflow_ft_provider.partitions.naming import check_relative_path
from airflow_ft_provider.safe_json import is_finite_number, load_json
from airflow_ft_provider.spark.carried import BATCH_DIR
from airflow_ft_provider.spark.sink_log import committed_names, has_sink_log, log_files

METADATA_VERSION = 2  # 2: an output file's rows (version 1's files have none: a restore fetches them)
_READABLE_VERSIONS = (1, 2)
MAX_METADATA_BYTES = 8 << 20  # a checkpoint of ~50,000 files
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_LEADING_NUMBER = re.compile(r"^(\d+)")
# A state store version's files: HDFS-backed <v>.delta/.snapshot, RocksDB <v>.changelog/.zip (with a
# unique id after '_' in checkpoint format v2); RocksDB's SST files are numbered otherwise.
_STATE_VERSION = re.compile(r"^(\d+)(?:_[0-9A-Za-z-]+)?\.(?:delta|snapshot|changelog|zip)\Z")
_LOGS = ("offsets", "commits")


class InvalidCheckpoint(ValueError):
    """A ``_metadata`` document that no writer of ours produced (or one of its files is damaged)."""


@dataclass(frozen=True)
class CheckpointFile:
    path: str  # relative to the task-local directory: spark/..., out/<result>/bNNNNNNNNNN/...
    size: int
    sha256: str  # of the file's content (the object is named by it, compressed or not)
    compressed: bool = False  # stored gzip-compressed (execution.checkpointing.snapshot-compression)
    rows: int | None = None  # an output file's, from its Parquet footer: a restore may leave it in the store


@dataclass(frozen=True)
class CheckpointMetadata:
    """A completed checkpoint in the store, as its ``_metadata`` describes it."""

    checkpoint_id: int  # the last micro-batch it covers
    taken_by_try: int
    inputs: Mapping[str, str]  # input partition id -> committed attempt id (the fence)
    total_bytes: int  # the stage's input
    processed_bytes: int  # input read by batches 0..checkpoint_id
    local_path: str  # the task-local directory it was taken in (file:// URI): paths in Spark's logs
    files: tuple[CheckpointFile, ...]
    started: float
    completed: float
    uploaded_bytes: int  # what this checkpoint added to the store (its incremental size)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": METADATA_VERSION,
                "checkpoint_id": self.checkpoint_id,
                "taken_by_try": self.taken_by_try,
                "inputs": dict(self.inputs),
                "total_bytes": self.total_bytes,
                "processed_bytes": self.processed_bytes,
                "local_path": self.local_path,
                "files": [[f.path, f.size, f.sha256, f.compressed, f.rows] for f in self.files],
                "started": self.started,
                "completed": self.completed,
                "uploaded_bytes": self.uploaded_bytes,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, *, expected_id: int) -> CheckpointMetadata:
        """Validated: every path stays inside the task's directory, every number is a number."""
        try:
            doc = load_json(data, max_bytes=MAX_METADATA_BYTES)
        except ValueError as err:
            raise InvalidCheckpoint(
                f"checkpoint {expected_id}'s _metadata is not valid JSON: {err}"
            ) from None
        if not isinstance(doc, dict) or doc.get("version") not in _READABLE_VERSIONS:
            raise InvalidCheckpoint(f"checkpoint {expected_id}'s _metadata has an unknown version")
        counts = ("checkpoint_id", "taken_by_try", "total_bytes", "processed_bytes", "uploaded_bytes")
        for key in counts:
            if isinstance(doc.get(key), bool) or not isinstance(doc.get(key), int) or doc[key] < 0:
                raise InvalidCheckpoint(f"checkpoint {expected_id}'s _metadata: {key} is not a count")
        if doc["checkpoint_id"] != expected_id:
            raise InvalidCheckpoint(
                f"checkpoint {expected_id}'s _metadata names checkpoint {doc['checkpoint_id']}"
            )
        if not all(is_finite_number(doc.get(key)) for key in ("started", "completed")):
            raise InvalidCheckpoint(f"checkpoint {expected_id}'s _metadata: started/completed are not times")
        inputs = doc.get("inputs")
        if not isinstance(inputs, dict) or not all(isinstance(v, str) for v in inputs.values()):
            raise InvalidCheckpoint(f"checkpoint {expected_id}'s _metadata: inputs is not a map of attempts")
        local_path = doc.get("local_path")
        if not isinstance(local_path, str) or not local_path.startswith("file:///"):
            raise InvalidCheckpoint(f"checkpoint {expected_id}'s _metadata: local_path is not a file:// URI")
        return cls(
            checkpoint_id=doc["checkpoint_id"],
            taken_by_try=doc["taken_by_try"],
            inputs=inputs,
            total_bytes=doc["total_bytes"],
            processed_bytes=doc["processed_bytes"],
            local_path=local_path,
            files=tuple(_file(entry, expected_id) for entry in _list(doc.get("files"), expected_id)),
            started=float(doc["started"]),
            completed=float(doc["completed"]),
            uploaded_bytes=doc["uploaded_bytes"],
        )


def _list(value: object, checkpoint_id: int) -> list[object]:
    if not isinstance(value, list):
        raise InvalidCheckpoint(f"checkpoint {checkpoint_id}'s _metadata: files is not a list")
    return value


def _file(entry: object, checkpoint_id: int) -> CheckpointFile:
    where = f"checkpoint {checkpoint_id}'s _metadata: file entry {str(entry)[:80]!r}"
    if not isinstance(entry, list) or len(entry) not in (4, 5):
        raise InvalidCheckpoint(f"{where} is not [path, size, sha256, compressed, rows]")
    path, size, sha256, compressed, rows = [*entry, None][:5]
    try:
        check_relative_path("checkpoint file", path)
    except ValueError as err:
        raise InvalidCheckpoint(f"{where}: {err}") from None
    if not str(path).startswith(("spark/", "out/")):
        raise InvalidCheckpoint(f"{where}: not under spark/ or out/")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise InvalidCheckpoint(f"{where}: size is not a count")
    if not isinstance(sha256, str) or not _SHA256.match(sha256) or not isinstance(compressed, bool):
        raise InvalidCheckpoint(f"{where}: not a SHA-256 digest and a compressed flag")
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
        raise InvalidCheckpoint(f"{where}: rows is not a count")
    return CheckpointFile(path, size, sha256, compressed, rows)


def files_of_checkpoint(task_dir: Path, checkpoint_id: int) -> list[Path]:
    """The files of the task-local directory that make checkpoint ``checkpoint_id`` (see the module)."""
    found: list[Path] = []
    spark = task_dir / "spark"
    for path in _visible_files(spark):
        parts = path.relative_to(spark).parts
        if parts[0] in _LOGS or parts[0] == "sources":
            number = _LEADING_NUMBER.match(parts[-1])
            if number and int(number.group(1)) > checkpoint_id:
                continue  # the batch in flight
        elif parts[0] == "state":
            number = _STATE_VERSION.match(parts[-1])
            if number and int(number.group(1)) > checkpoint_id + 1:
                continue  # state version k+1 is batch k's
        found.append(path)
    out = task_dir / "out"
    for result in sorted(out.iterdir()) if out.is_dir() else ():
        if has_sink_log(result):  # append mode: Spark's file sink, whose log names each batch's files
            found.extend(log_files(result, through=checkpoint_id))
            names = committed_names(result, through=checkpoint_id)
            found.extend(result / name for name in sorted(names) if (result / name).is_file())
            continue
        for batch in sorted(result.iterdir()) if result.is_dir() else ():  # complete mode: foreachBatch
            match = BATCH_DIR.match(batch.name)
            if match and int(match.group(1)) <= checkpoint_id:
                found.extend(_visible_files(batch))
    return found


def _visible_files(root: Path) -> Iterator[Path]:
    """Files below ``root`` but Spark's and Hadoop's hidden ones (temporaries, .crc checksums), which
    come and go while Spark runs: they are passed over by name, never looked at."""
    found: list[Path] = []
    for folder, dirs, names in os.walk(root):  # a folder removed meanwhile is skipped
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(Path(folder) / name for name in names if not name.startswith("."))
    yield from sorted(found)


def relocate_source_logs(task_dir: Path, taken_in: str) -> int:
    """Rewrite the paths Spark's file-source log recorded in ``taken_in`` (another worker's directory)
    to this directory's, so that input files already processed are recognized as such (Spark's file
    source tracks files by path: left alone, every input file would be read again); the file sink's
    log too, so that it names this directory's output. Returns the number of log files rewritten."""
    here = task_dir.as_uri()
    if taken_in.rstrip("/") == here.rstrip("/"):
        return 0
    old, new = taken_in.rstrip("/") + "/", here.rstrip("/") + "/"
    old_path, new_path = old.removeprefix("file://"), new.removeprefix("file://")
    rewritten = 0
    out = task_dir / "out"
    sink_logs = [log for result in sorted(out.iterdir()) for log in log_files(result)] if out.is_dir() else []
    for log in [*_visible_files(task_dir / "spark" / "sources"), *sink_logs]:
        text = log.read_text()
        changed = text.replace(old, new).replace(f"file:{old_path}", f"file:{new_path}")
        if changed != text:
            log.write_text(changed)
            rewritten += 1
    return rewritten
