"""A pipelined partition's handle: which execution of its producer holds the data, and where (a scratch
prefix, or a Connect server's cached global temporary view), with the consumers done with it.

Stored as JSON at ``<run>/pipelined/<result>/<map-index>.json`` (``pipelined.py`` replaces it by
compare-and-swap); read back validated, field by field, against the partition it must name."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..safe_json import load_json
from .errors import PartitionNotFound, Unavailable
from .manifest import Producer
from .naming import PartitionRef

HANDLE_VERSION = 1
MAX_HANDLE_BYTES = 16 * 1024


def execution_id(try_number: int) -> str:
    """The execution a producer try writes: one per try, so a re-run never overwrites what was read."""
    return f"t{try_number}"


_EXECUTION = re.compile(r"^t([0-9]{1,9})\Z")


def execution_try(execution: str) -> int | None:
    """The producer try an execution id names (None: not one of ours)."""
    match = _EXECUTION.match(execution)
    return int(match.group(1)) if match else None


_VIEW = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z")  # safe as global_temp.<view> in SQL
_SERVER = re.compile(r"^sc://[A-Za-z0-9_.:\[\]-]{1,255}\Z")


@dataclass(frozen=True)
class EngineLocation:
    """A pipelined partition kept by a Spark Connect server as a global temporary view."""

    server: str  # sc://host:port (no credentials)
    view: str

    def __post_init__(self) -> None:
        if not isinstance(self.server, str) or not _SERVER.match(self.server):
            raise ValueError(f"invalid Spark Connect server {self.server!r}: use sc://host:port")
        if not isinstance(self.view, str) or not _VIEW.match(self.view):
            raise ValueError(f"invalid view name {self.view!r}: use letters, digits and '_'")


def _rows(value: object) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"'rows' must be null or a count, got {value!r}")
    return value


@dataclass(frozen=True)
class PipelinedHandle:
    """Where the current execution of one pipelined partition is, and who has consumed it."""

    partition_id: str
    execution: str
    producer: Producer
    published_at: float
    engine: EngineLocation | None = None  # None: S3 scratch of the execution
    consumed_by: tuple[str, ...] = ()
    rows: int | None = None  # rows the engine's view had when published (a consumer counts them again)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": HANDLE_VERSION,
                "partition_id": self.partition_id,
                "execution": self.execution,
                "producer": {
                    "task_id": self.producer.task_id,
                    "map_index": self.producer.map_index,
                    "try_number": self.producer.try_number,
                },
                "published_at": self.published_at,
                "engine": None
                if self.engine is None
                else {"server": self.engine.server, "view": self.engine.view},
                "consumed_by": list(self.consumed_by),
                "rows": self.rows,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes, expected: PartitionRef) -> PipelinedHandle:
        """A stored handle, validated; anything else is an invalid one (the next publish replaces it)."""
        try:
            doc = load_json(raw, max_bytes=MAX_HANDLE_BYTES)
            if not isinstance(doc, dict) or doc.get("version") != HANDLE_VERSION:
                raise ValueError(
                    f"unsupported version {doc.get('version') if isinstance(doc, dict) else doc!r}"
                )
            producer = doc["producer"]
            if not isinstance(producer, dict):
                raise ValueError("'producer' must be an object")
            engine, consumed = doc.get("engine"), doc.get("consumed_by", [])
            if engine is not None and not isinstance(engine, dict):
                raise ValueError("'engine' must be an object or null")
            if not isinstance(consumed, list) or not all(isinstance(c, str) for c in consumed):
                raise ValueError("'consumed_by' must be a list of task ids")
            handle = cls(
                partition_id=doc["partition_id"],
                execution=doc["execution"],
                producer=Producer(producer["task_id"], producer["map_index"], producer["try_number"]),
                published_at=float(doc["published_at"]),
                engine=None if engine is None else EngineLocation(engine["server"], engine["view"]),
                consumed_by=tuple(consumed),
                rows=_rows(doc.get("rows")),
            )
            if handle.partition_id != expected.partition_id:
                raise ValueError(f"it names partition {handle.partition_id!r}")
            if handle.execution != execution_id(handle.producer.try_number):
                raise ValueError(f"execution {handle.execution!r} is not try {handle.producer.try_number}'s")
        except (KeyError, TypeError, ValueError) as err:
            detail = f"{err!r}" if isinstance(err, KeyError) else str(err)
            raise PartitionNotFound(
                expected.partition_id,
                Unavailable.INVALID_MANIFEST,
                f"invalid pipelined-partition handle: {detail}",
                run=str(expected.run),
            ) from None
        return handle
