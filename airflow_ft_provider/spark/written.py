"""``_ft_written.json``: the files of the task attempts Spark committed, as the write recorded them.

The executors' writes (``partition_objects.py``) put it under the try's attempt prefix once every
Spark task of the write has committed; the operator builds the partition's manifest from it
(``partitions/commit.py``) without reading any data. Stdlib only: the write's last task writes it; the
store reads it as any stored JSON (``safe_json.load_json``) and checks it with ``written_files``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeGuard

WRITTEN_RECORD = "_ft_written.json"
RECORD_VERSION = 1
MAX_RECORD_BYTES = 16 << 20  # ~100,000 files; a record beyond it is not one this writer wrote
_FILE_NAME = re.compile(r"part-\d{5}-a\d+-[0-9a-f]{12}\.parquet")  # what WriteObjects names its files


@dataclass(frozen=True)
class WrittenFile:
    """One committed task attempt's object: name under the attempt prefix, size, checksum, rows."""

    key: str
    size: int
    checksum: str
    rows: int


def encode_written(files: Sequence[WrittenFile]) -> bytes:
    return json.dumps(
        {"version": RECORD_VERSION, "files": [asdict(f) for f in files]}, sort_keys=True
    ).encode()


def parse_written(data: bytes) -> list[WrittenFile]:
    """A record's bytes, parsed and checked; ValueError when it is not one."""
    if len(data) > MAX_RECORD_BYTES:
        raise ValueError(f"{WRITTEN_RECORD} has {len(data)} bytes, more than a record can have")
    try:
        doc = json.loads(data)
    except ValueError as err:
        raise ValueError(f"{WRITTEN_RECORD} is not JSON ({err})") from None
    return written_files(doc)


def written_files(doc: object) -> list[WrittenFile]:
    """The files of a parsed record, every field checked; ValueError when it is not a record."""
    if (
        not isinstance(doc, dict)
        or doc.get("version") != RECORD_VERSION
        or not isinstance(doc.get("files"), list)
    ):
        raise ValueError(f"{WRITTEN_RECORD} is not a version-{RECORD_VERSION} record of written files")
    written = []
    for entry in doc["files"]:
        if not isinstance(entry, dict):
            raise ValueError(f"{WRITTEN_RECORD}: {entry!r} is not an entry")
        key, size, checksum, rows = (entry.get(k) for k in ("key", "size", "checksum", "rows"))
        if not (isinstance(key, str) and _FILE_NAME.fullmatch(key)):
            raise ValueError(f"{WRITTEN_RECORD}: {key!r} is not a file name this writer gives")
        if not (_count(size) and _count(rows) and isinstance(checksum, str) and ":" in checksum):
            raise ValueError(f"{WRITTEN_RECORD}: the entry of {key} needs size, rows and checksum")
        written.append(WrittenFile(key, size, checksum, rows))
    if len({f.key for f in written}) != len(written):
        raise ValueError(f"{WRITTEN_RECORD} lists a file twice")
    return written


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def write_local_marker(spark: Any, path: str, content: dict[str, object]) -> None:
    """``content`` as JSON at ``path``, through Hadoop's FileSystem in the driver, so one code path
    serves every file system Spark's driver reaches (``file://`` staging, ``s3a://``)."""
    jvm: Any = spark.sparkContext._jvm
    target = jvm.org.apache.hadoop.fs.Path(path)
    fs = target.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.create(target, False)
    try:
        stream.write(bytearray(json.dumps(content).encode()))
    finally:
        stream.close()
