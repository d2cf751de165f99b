"""The manifest: the single object whose PUT makes a partition visible, and what readers trust.

Readers resolve a partition only through its manifest, so a crash before the manifest PUT leaves
nothing visible and a crash after it leaves a complete partition. Everything read back is validated:
a manifest is data from the network and may be truncated, hand-edited or hostile.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..safe_json import InvalidJson, load_json
from ..spark.checksums import CHECKSUM, CHECKSUM_ALGORITHMS, DEFAULT_CHECKSUM, check_algorithm
from .naming import (
    PartitionRef,
    attempt_dir,
    check_map_index,
    check_name,
    check_relative_path,
)
from .provenance import Provenance

SCHEMA_VERSION = 1
MAX_MANIFEST_BYTES = 1 << 20  # 1 MiB: thousands of files; a bigger one is a bug or an attack
KINDS = ("blocking", "pipelined")
# Patterns end in \Z, not $: "$" also matches before a final newline ("raw\n").
_CODEC = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}\Z")
_HASH_CHUNK = 4 << 20


class InvalidManifest(ValueError):
    """A manifest that does not validate; the partition is unavailable, not half-readable."""


_DIGEST_LENGTH = {"sha256": 64, "crc32c": 8, "crc32": 8}
_ETAG = re.compile(r"^[\x21\x23-\x7e]{1,200}\Z")  # visible ASCII but '"'


def with_etags(entries: list[FileEntry], etags: Mapping[str, str | None], prefix: str) -> list[FileEntry]:
    """``entries`` with the ETags a LIST of their attempt just returned (keyed ``prefix + entry.key``)."""
    return [dataclasses.replace(e, etag=etags.get(prefix + e.key)) for e in entries]


def _file_json(entry: FileEntry) -> dict[str, object]:
    doc: dict[str, object] = {"key": entry.key, "size": entry.size, "checksum": entry.checksum}
    if entry.etag is not None:
        doc["etag"] = entry.etag
    return doc


def file_checksum(path: str | Path, algorithm: str = DEFAULT_CHECKSUM) -> str:
    """``"<algorithm>:<hex digest>"`` of a local file (hashlib releases the GIL, so threads overlap)."""
    hasher = CHECKSUM_ALGORITHMS[check_algorithm(algorithm)]()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(_HASH_CHUNK):
            hasher.update(chunk)
    return f"{algorithm}:{hasher.hexdigest()}"


@dataclass(frozen=True)
class FileEntry:
    """One data file; ``key`` is relative to the partition prefix (``attempts/<attempt>/<name>``)."""

    key: str
    size: int
    checksum: str
    # S3's ETag of the object when it was committed: a reader that leaves the bytes to Spark (s3a)
    # compares it with a LIST's, so a rewrite of the object, even to the same size, is noticed without a
    # download. None in manifests written before it was recorded, or by an endpoint that sends none.
    etag: str | None = None

    @property
    def name(self) -> str:
        """The file's path inside its attempt directory (what the producer called it)."""
        return self.key.split("/", 2)[2]


@dataclass(frozen=True)
class Producer:
    """The task instance that made the partition; ``try_number`` is the fencing token."""

    task_id: str
    map_index: int = -1
    try_number: int = 1

    def __post_init__(self) -> None:
        check_name("producer task id", self.task_id)
        object.__setattr__(self, "map_index", check_map_index(self.map_index))
        if isinstance(self.try_number, bool) or not isinstance(self.try_number, int) or self.try_number < 0:
            raise ValueError(
                f"invalid try number {self.try_number!r} of producer {self.task_id!r}: use the task "
                "instance's try_number (an integer ≥ 0)"
            )


@dataclass(frozen=True)
class Manifest:
    pipeline: str
    run_id: str
    result: str
    map_index: int
    kind: str
    attempt_id: str
    producer: Producer
    files: tuple[FileEntry, ...]
    format: str
    compression: str
    row_count: int | None
    created_at: float  # seconds since the epoch (UTC)
    schema_version: int = field(default=SCHEMA_VERSION)
    provenance: Provenance = field(default=Provenance())  # what it holds and came from (reuse)

    @property
    def ref(self) -> PartitionRef:
        return PartitionRef(self.pipeline, self.run_id, self.result, self.map_index)

    @property
    def partition_id(self) -> str:
        return self.ref.partition_id

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> bytes:
        doc = {
            "schema_version": self.schema_version,
            "partition": {
                "pipeline": self.pipeline,
                "run_id": self.run_id,
                "result": self.result,
                "map_index": self.map_index,
                "kind": self.kind,
            },
            "attempt_id": self.attempt_id,
            "producer": {
                "task_id": self.producer.task_id,
                "map_index": self.producer.map_index,
                "try_number": self.producer.try_number,
            },
            "format": self.format,
            "compression": self.compression,
            "row_count": self.row_count,
            "created_at": _format_time(self.created_at),
            "files": [_file_json(f) for f in self.files],
        }
        if self.provenance.content is not None:
            doc["content"] = self.provenance.content
        if self.provenance.lineage is not None:
            doc["lineage"] = self.provenance.lineage
        data = json.dumps(doc, indent=1, sort_keys=False).encode("utf-8")
        if len(data) > MAX_MANIFEST_BYTES:
            raise ValueError(
                f"manifest of partition {self.partition_id!r} would be {len(data)} bytes, over the "
                f"{MAX_MANIFEST_BYTES}-byte limit ({len(self.files)} files); write fewer, larger files"
            )
        return data

    @classmethod
    def from_json(
        cls, data: bytes, *, expected: PartitionRef | None = None, kind: str | None = None
    ) -> Manifest:
        """Parse and validate; ``InvalidManifest`` names the first problem found."""
        if len(data) > MAX_MANIFEST_BYTES:
            raise InvalidManifest(
                f"manifest is over the {MAX_MANIFEST_BYTES}-byte limit (not written by this provider); the "
                "producer's next commit replaces it"
            )
        try:
            doc = load_json(data, max_bytes=MAX_MANIFEST_BYTES)
        except InvalidJson as exc:
            raise InvalidManifest(f"manifest is not JSON: {exc}") from None
        try:
            manifest = _parse(doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidManifest(f"manifest does not validate: {exc}") from None
        if expected is not None and manifest.ref != expected:
            raise InvalidManifest(f"manifest describes partition {manifest.ref}, expected {expected}")
        if kind is not None and manifest.kind != kind:
            raise InvalidManifest(f"manifest is for a {manifest.kind} partition, expected {kind}")
        return manifest


def _format_time(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="milliseconds")


def _typed(doc: dict[str, object], key: str, kind: type | tuple[type, ...], *, nullable: bool = False) -> Any:
    if key not in doc:
        raise ValueError(f"{key!r} is missing")
    value = doc[key]
    if value is None and nullable:
        return None
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise TypeError(f"{key!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _parse(doc: Any) -> Manifest:
    if not isinstance(doc, dict):
        raise TypeError(f"manifest must be a JSON object, got {type(doc).__name__}")
    version = _typed(doc, "schema_version", int)
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"schema_version {version} is not supported (this provider reads {SCHEMA_VERSION}); upgrade "
            "the provider on this worker"
        )
    partition = _typed(doc, "partition", dict)
    kind = _typed(partition, "kind", str)
    if kind not in KINDS:
        raise ValueError(f"partition kind must be one of {KINDS}, got {kind!r}")
    ref = PartitionRef(
        _typed(partition, "pipeline", str),
        _typed(partition, "run_id", str),
        _typed(partition, "result", str),
        _typed(partition, "map_index", int),
    )
    attempt_id = check_name("attempt id", _typed(doc, "attempt_id", str))
    producer_doc = _typed(doc, "producer", dict)
    producer = Producer(
        _typed(producer_doc, "task_id", str),
        _typed(producer_doc, "map_index", int),
        _typed(producer_doc, "try_number", int),
    )
    fmt = _typed(doc, "format", str)
    compression = _typed(doc, "compression", str)
    for name, value in (("format", fmt), ("compression", compression)):
        if not _CODEC.match(value):
            raise ValueError(f"{name} {value!r} is not a lowercase identifier")
    row_count = _typed(doc, "row_count", int, nullable=True)
    if row_count is not None and row_count < 0:
        raise ValueError(f"row_count must be ≥ 0, got {row_count}")
    created_at = dt.datetime.fromisoformat(_typed(doc, "created_at", str))
    if created_at.tzinfo is None:
        raise ValueError("created_at must carry a time zone")
    inside = attempt_dir(attempt_id)
    files = []
    seen: set[str] = set()
    for entry in _typed(doc, "files", list):
        if not isinstance(entry, dict):
            raise TypeError(f"file entries must be objects, got {entry!r}")
        key = check_relative_path("file key", _typed(entry, "key", str))
        if not key.startswith(inside) or key == inside:
            raise ValueError(f"file key {key!r} is outside the attempt directory {inside!r}")
        if key in seen:
            raise ValueError(f"file key {key!r} is listed twice")
        seen.add(key)
        size = _typed(entry, "size", int)
        if size < 0:
            raise ValueError(f"size of {key!r} must be ≥ 0, got {size}")
        checksum = _typed(entry, "checksum", str)
        match = CHECKSUM.match(checksum)
        if not match or len(match.group("value")) != _DIGEST_LENGTH[match.group("algorithm")]:
            raise ValueError(
                f"checksum of {key!r} must be 'crc32c:<8 hex>', 'sha256:<64 hex>' or 'crc32:<8 hex>', "
                f"got {checksum!r}"
            )
        etag = entry.get("etag")
        if etag is not None and not (isinstance(etag, str) and _ETAG.match(etag)):
            raise ValueError(f"etag of {key!r} must be 1-200 visible characters but '\"', got {etag!r}")
        files.append(FileEntry(key, size, checksum, etag))
    _check_no_file_is_a_directory(seen)
    return Manifest(
        pipeline=ref.pipeline,
        run_id=ref.run_id,
        result=ref.result,
        map_index=ref.map_index,
        kind=kind,
        attempt_id=attempt_id,
        producer=producer,
        files=tuple(files),
        format=fmt,
        compression=compression,
        row_count=row_count,
        created_at=created_at.timestamp(),
        schema_version=version,
        provenance=Provenance(_optional_str(doc, "content"), _optional_str(doc, "lineage")),
    )


def _optional_str(doc: dict[str, object], key: str) -> str | None:
    """A key manifests written before it existed lack (None), else a string."""
    return _typed(doc, key, str, nullable=True) if key in doc else None


def _check_no_file_is_a_directory(keys: set[str]) -> None:
    """``a`` and ``a/b`` cannot both be files on a disk: the reader would fail with a raw OSError."""
    for key in sorted(keys):
        parts = key.split("/")
        for end in range(3, len(parts)):  # directories below attempts/<attempt>/
            directory = "/".join(parts[:end])
            if directory in keys:
                raise ValueError(
                    f"file key {directory!r} is also the directory of {key!r}; a partition cannot hold both"
                )


def check_codec(kind: str, value: str) -> str:
    if not isinstance(value, str) or not _CODEC.match(value):
        raise ValueError(f"invalid {kind} {value!r}: use a lowercase name such as 'parquet' or 'snappy'")
    return value
