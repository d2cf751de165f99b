"""Output a restored checkpoint left in the store: a retry on another worker does not fetch the output of
the micro-batches its checkpoint covers (most of the output, late in a stage). The commit copies those
files inside S3. The output directory (append mode: Spark's file sink writes one flat directory) or
each such batch directory (complete mode: one per micro-batch) holds a note of them instead:

    out/<result>/.ft_carried.json                {"files": [[name, size, sha256, rows], ...]}
    out/<result>/bNNNNNNNNNN/.ft_carried.json

The note is hidden (a leading '.'), so Spark's reader, the footer count and the commit's listing pass
it over. A complete-mode micro-batch that removes the older batches' directories removes their notes
with them, so a note is part of the output exactly while its directory is. Stdlib only: the stage
application adds the noted rows to its count in a spark-submit driver too.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

CARRIED_NOTE = ".ft_carried.json"
MAX_NOTE_BYTES = 4 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=+-]*\Z")  # as partitions/naming.py allows
BATCH_DIR = re.compile(r"^b(\d{10})\Z")  # a complete-mode micro-batch's directory: bNNNNNNNNNN


class InvalidNote(ValueError):
    """A carried-output note no restore of ours wrote."""


@dataclass(frozen=True)
class CarriedFile:
    name: str  # inside its batch directory
    size: int
    sha256: str  # the object the store keeps it as (``objects/<sha256>``)
    rows: int  # from its Parquet footer when the checkpoint was taken


def write_note(batch_dir: Path, files: list[CarriedFile]) -> None:
    """Note ``files`` (of the store, not of this disk) as part of ``batch_dir``'s output, atomically."""
    batch_dir.mkdir(parents=True, exist_ok=True)
    temp = batch_dir / f"{CARRIED_NOTE}.tmp"
    temp.write_text(json.dumps({"files": [[f.name, f.size, f.sha256, f.rows] for f in files]}))
    os.replace(temp, batch_dir / CARRIED_NOTE)


def read_note(batch_dir: Path) -> list[CarriedFile]:
    """The files ``batch_dir``'s note lists ([] without a note); InvalidNote if it is not one of ours."""
    path = batch_dir / CARRIED_NOTE
    try:
        with open(path, "rb") as note:
            data = note.read(MAX_NOTE_BYTES + 1)
    except FileNotFoundError:
        return []
    if len(data) > MAX_NOTE_BYTES:
        raise InvalidNote(f"{path}: larger than {MAX_NOTE_BYTES} bytes")
    try:
        entries = json.loads(data)["files"]
    except (ValueError, KeyError, TypeError):
        raise InvalidNote(f"{path}: not a carried-output note") from None
    if not isinstance(entries, list):
        raise InvalidNote(f"{path}: files is not a list")
    return [_entry(entry, path) for entry in entries]


def _entry(entry: object, path: Path) -> CarriedFile:
    if not isinstance(entry, list) or len(entry) != 4:
        raise InvalidNote(f"{path}: an entry is not [name, size, sha256, rows]")
    name, size, sha256, rows = entry
    if not isinstance(name, str) or not all(_NAME.match(part) for part in name.split("/")):
        raise InvalidNote(f"{path}: {str(name)[:80]!r} is not a file name inside the batch directory")
    counts = (size, rows)
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in counts):
        raise InvalidNote(f"{path}: {name!r}: size and rows must be counts")
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise InvalidNote(f"{path}: {name!r}: not a SHA-256 digest")
    return CarriedFile(name, size, sha256, rows)


def carried(output_dir: Path, *, through: int | None = None) -> dict[Path, CarriedFile]:
    """Every noted file of ``output_dir`` (``out/<result>``) as the path it would have here: its own
    note's, and those of its batch directories up to micro-batch ``through`` (all without it)."""
    found = {output_dir / f.name: f for f in read_note(output_dir)}  # the file sink's (flat) layout
    for batch_dir in sorted(output_dir.iterdir()) if output_dir.is_dir() else ():
        match = BATCH_DIR.match(batch_dir.name)
        if match and (through is None or int(match.group(1)) <= through):
            found.update({batch_dir / f.name: f for f in read_note(batch_dir)})
    return found


def carried_rows(location: str) -> int:
    """The rows of an output location's noted files (the stage's count adds them to its footers')."""
    if not location.startswith("file://"):
        return 0
    return sum(f.rows for f in carried(Path(location.removeprefix("file://"))).values())
