"""Partition identity and the S3 key layout, validated so that no name can escape the store's prefix.

Layout under ``s3://<bucket>/<prefix>/``::

    <pipeline>/<run>/blocking/<result>/<map-index>/manifest.json          the commit point
    <pipeline>/<run>/blocking/<result>/<map-index>/attempts/<attempt>/…   data files of one attempt
    <pipeline>/<run>/scratch/<execution>/<result>/<map-index>/…           pipelined partitions
    <pipeline>/<run>/pipelined/<result>/<map-index>.json                 which execution is current
    <pipeline>/<run>/leases/<consumer>.json                               registered consumers
    <pipeline>/<run>/_run/{ended,releasing,released}.json                 life-cycle markers
    <pipeline>/<run>/_run/manifest-index.json                             the run's manifests at its end

``<run>`` is the run id with every character outside ``[A-Za-z0-9_.-]`` written as ``~HH`` (UTF-8
bytes), because Airflow run ids carry ``:`` and ``+`` that Hadoop paths and URLs handle badly.
``<map-index>`` is ``-1`` for an unmapped producer, as in Airflow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..failover.indexed_name import UNMAPPED, IndexedName

MAX_NAME_LENGTH = 250  # Airflow's limit for dag ids, task ids and run ids

# Patterns end in \Z, not $: "$" also matches before a final newline ("raw\n").
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_.-]+")
_ENCODED = re.compile(r"^(?:[A-Za-z0-9_.-]|~[0-9A-F]{2})+\Z")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")


def check_name(kind: str, value: object) -> str:
    """Names that become one key segment: pipeline (DAG id), result, consumer, execution and attempt ids."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"invalid {kind} {value!r}: must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(
            f"invalid {kind} {value[:40]!r}…: longer than {MAX_NAME_LENGTH} characters; shorten it"
        )
    if not _NAME.match(value):
        raise ValueError(
            f"invalid {kind} {value!r}: use letters, digits, '_', '.' or '-', starting with a letter, digit "
            "or '_' (no '/', '..', spaces or control characters, which could escape the store's prefix)"
        )
    return value


def check_encoded_name(kind: str, value: object) -> str:
    """Free-form names encoded in keys: run ids (``manual__2026-11-22T04:00:00+00:00``), consumers."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"invalid {kind} {value!r}: must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(
            f"invalid {kind} {value[:40]!r}…: longer than {MAX_NAME_LENGTH} characters; shorten it"
        )
    clean = value.isprintable() and "/" not in value and "\\" not in value  # the common case, in C
    bad = [] if clean else sorted({c for c in value if c in "/\\" or not c.isprintable()})
    if bad or value in (".", ".."):
        raise ValueError(
            f"invalid {kind} {value!r}: must not be '.' or '..' nor contain '/', '\\' or control characters"
            + (f" (found {bad!r})" if bad else "")
            + "; use the id exactly as Airflow made it"
        )
    if (encoded := len(encode_segment(value))) > MAX_PATH_SEGMENT:
        # ':' and '+' take 3 characters in a key segment, other non-ASCII up to 12: a worker's cache and
        # staging directories would fail with "File name too long" (errno 36) instead of this.
        raise ValueError(
            f"invalid {kind} {value[:40]!r}…: it becomes a key segment and a directory name of {encoded} "
            f"characters (longer than {MAX_PATH_SEGMENT}) once its characters outside [A-Za-z0-9_.-] are "
            "encoded; use a shorter id"
        )
    return value


def check_run_id(run_id: object) -> str:
    return check_encoded_name("run id", run_id)


def check_map_index(map_index: object) -> int:
    if map_index is None:
        return UNMAPPED
    if isinstance(map_index, bool) or not isinstance(map_index, int) or map_index < UNMAPPED:
        raise ValueError(
            f"invalid map index {map_index!r}: use None or -1 for an unmapped producer, else an integer ≥ 0"
        )
    return map_index


@lru_cache(maxsize=4096)  # a run's id is encoded for every key of the run: thousands of times a page
def encode_segment(value: str) -> str:
    """Reversible, key-safe encoding: ``[A-Za-z0-9_.-]`` kept, everything else ``~HH`` per UTF-8 byte."""
    return _UNSAFE_RUN.sub(_encoded, value)


def _encoded(unsafe: re.Match[str]) -> str:
    return "".join(f"~{byte:02X}" for byte in unsafe.group(0).encode("utf-8"))


def decode_segment(segment: str) -> str:
    if not _ENCODED.match(segment):
        raise ValueError(f"not an encoded key segment: {segment!r}")
    return re.sub(
        r"(?:~[0-9A-F]{2})+",
        lambda m: bytes.fromhex(m.group(0).replace("~", "")).decode("utf-8"),
        segment,
    )


def partition_id(result: str, map_index: int) -> str:
    """The failover core's id: ``result`` for an unmapped producer, ``result[i]`` for map index i."""
    return str(IndexedName(result, map_index))


@dataclass(frozen=True)
class RunRef:
    """One DAG run of a pipeline (Flink's job)."""

    pipeline: str
    run_id: str

    def __post_init__(self) -> None:
        check_name("pipeline (DAG id)", self.pipeline)
        check_run_id(self.run_id)

    def partition(self, result: str, map_index: int | None = None) -> PartitionRef:
        return PartitionRef(self.pipeline, self.run_id, result, check_map_index(map_index))

    def parse(self, partition: str | PartitionRef) -> PartitionRef:
        """A partition of this run from a failover-core id (``result`` / ``result[i]``) or a ref."""
        if isinstance(partition, PartitionRef):
            if partition.run != self:
                raise ValueError(f"partition {partition} belongs to run {partition.run}, not {self}")
            return partition
        try:
            pid = IndexedName.parse(partition)
        except ValueError:
            raise ValueError(
                f"invalid partition id {partition!r}: use 'result' for an unmapped producer or 'result[i]' "
                "for map index i"
            ) from None
        return PartitionRef(self.pipeline, self.run_id, pid.name, pid.index)

    def __str__(self) -> str:
        return f"{self.pipeline}/{self.run_id}"


@dataclass(frozen=True)
class PartitionRef:
    """One producer task instance's part of a named result (Flink's result partition)."""

    pipeline: str
    run_id: str
    result: str
    map_index: int = UNMAPPED  # None is accepted too, and stored as UNMAPPED

    def __post_init__(self) -> None:
        check_name("pipeline (DAG id)", self.pipeline)
        check_run_id(self.run_id)
        check_name("result name", self.result)
        object.__setattr__(self, "map_index", check_map_index(self.map_index))

    @property
    def run(self) -> RunRef:
        return RunRef(self.pipeline, self.run_id)

    @property
    def partition_id(self) -> str:
        return partition_id(self.result, self.map_index)

    def __str__(self) -> str:
        return f"{self.pipeline}/{self.run_id}/{self.partition_id}"


def check_relative_path(kind: str, path: object) -> str:
    """A '/'-separated relative path whose every segment is a safe name (files inside a partition),
    short enough for every file system a reader stores it on and for S3 (see the limits above)."""
    if not isinstance(path, str) or not path or path.startswith("/"):
        raise ValueError(f"invalid {kind} {path!r}: must be a non-empty relative path")
    if len(path) > MAX_RELATIVE_PATH:
        raise ValueError(
            f"invalid {kind} {path[:60]!r}…: {len(path)} characters, longer than {MAX_RELATIVE_PATH}; "
            "a reader stores it under a local directory and S3 keys end at 1024 bytes: shorten the "
            "writer's file names or nest fewer directories"
        )
    for segment in path.split("/"):
        if len(segment) > MAX_PATH_SEGMENT:
            raise ValueError(
                f"invalid {kind} {path[:60]!r}…: segment {segment[:40]!r}… has {len(segment)} characters, "
                f"longer than {MAX_PATH_SEGMENT}; file systems allow 255 bytes per name, and a reader adds "
                "a temporary suffix while it downloads: shorten the writer's file names"
            )
        if segment in (".", "..") or not _SAFE_FILE.match(segment):
            raise ValueError(
                f"invalid {kind} {path!r}: segment {segment!r} is not allowed; use letters, digits, '_', "
                "'.', '-' or '=' (no '..', empty segments, spaces or control characters)"
            )
    return path


# Limits of a file's path inside a partition. A reader writes it below its own directories (the local
# cache, a staging folder) and downloads into '.<name>.<8 hex>.tmp' first: 240 + 14 stays within the
# 255 bytes per name of ext4, XFS, APFS and NTFS (names here are ASCII). 512 for the whole path leaves
# S3's 1024-byte key limit room for the store prefix, pipeline, run and result around it.
MAX_PATH_SEGMENT = 240
MAX_RELATIVE_PATH = 512
# File names produced by writers (Spark: part-00000-<uuid>.c000.snappy.parquet, Hive-style a=1 dirs).
_SAFE_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=+-]*\Z")


@dataclass(frozen=True)
class StoreLayout:
    """Where everything lives; the only place that turns names into S3 keys."""

    bucket: str
    prefix: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.bucket, str) or not _BUCKET.match(self.bucket) or ".." in self.bucket:
            raise ValueError(
                f"invalid S3 bucket name {self.bucket!r}: use 3-63 lowercase letters, digits, '.' or '-', "
                "starting and ending with a letter or digit"
            )
        prefix = self.prefix.strip("/") if isinstance(self.prefix, str) else self.prefix
        if prefix:
            check_relative_path("store prefix", prefix)
        object.__setattr__(self, "prefix", f"{prefix}/" if prefix else "")

    @classmethod
    def from_url(cls, url: str) -> StoreLayout:
        if not isinstance(url, str) or not url.startswith("s3://"):
            raise ValueError(f"invalid partition store URL {url!r}: use s3://bucket/prefix/")
        bucket, _, prefix = url[len("s3://") :].partition("/")
        return cls(bucket, prefix)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def pipeline_prefix(self, pipeline: str) -> str:
        return f"{self.prefix}{check_name('pipeline (DAG id)', pipeline)}/"

    def run_prefix(self, run: RunRef) -> str:
        return f"{self.pipeline_prefix(run.pipeline)}{encode_segment(run.run_id)}/"

    def blocking_prefix(self, run: RunRef) -> str:
        return f"{self.run_prefix(run)}blocking/"

    def partition_prefix(self, ref: PartitionRef) -> str:
        return f"{self.blocking_prefix(ref.run)}{ref.result}/{ref.map_index}/"

    def scratch_run_prefix(self, run: RunRef) -> str:
        return f"{self.run_prefix(run)}scratch/"

    def scratch_execution_prefix(self, run: RunRef, execution_id: str) -> str:
        return f"{self.scratch_run_prefix(run)}{check_name('execution id', execution_id)}/"

    def scratch_prefix(self, ref: PartitionRef, execution_id: str) -> str:
        return f"{self.scratch_execution_prefix(ref.run, execution_id)}{ref.result}/{ref.map_index}/"

    def pipelined_handle_key(self, ref: PartitionRef) -> str:
        return f"{self.run_prefix(ref.run)}pipelined/{ref.result}/{ref.map_index}.json"

    def leases_prefix(self, run: RunRef) -> str:
        return f"{self.run_prefix(run)}leases/"

    def lease_key(self, run: RunRef, consumer: str) -> str:
        return f"{self.leases_prefix(run)}{encode_segment(check_encoded_name('consumer', consumer))}.json"

    def checkpoints_prefix(self, run: RunRef, task: str) -> str:
        """A checkpointed task's completed checkpoints (``chk-<id>/_metadata``) and their ``objects/``."""
        return f"{self.run_prefix(run)}checkpoints/{encode_segment(check_encoded_name('task', task))}/"

    def marker_key(self, run: RunRef, marker: str) -> str:
        return f"{self.run_prefix(run)}_run/{marker}.json"

    def run_from_prefix(self, pipeline: str, run_prefix: str) -> RunRef:
        segment = run_prefix[len(self.pipeline_prefix(pipeline)) :].rstrip("/")
        return RunRef(pipeline, decode_segment(segment))


MANIFEST_NAME = "manifest.json"
ATTEMPTS_DIR = "attempts"


def attempt_dir(attempt_id: str) -> str:
    """Relative (to the partition prefix) directory of one attempt's data files."""
    return f"{ATTEMPTS_DIR}/{check_name('attempt id', attempt_id)}/"
