"""Spark's file sink log: which output files each micro-batch of an append-mode checkpointed stage
committed (``<output>/_spark_metadata/<batch>``; every tenth a ``<batch>.compact`` that repeats the
entries before it).

The file sink writes a micro-batch's files straight into the output directory and commits them by
writing the batch's log file; a batch that failed midway leaves files no log names. So the log, not
the directory, is the output: a checkpoint takes the files the log names up to its batch, and the
stage removes the others before it counts its rows. Stdlib only: this runs in a spark-submit driver too.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from pathlib import Path

SINK_LOG = "_spark_metadata"
_LOG_FILE = re.compile(r"^(\d+)(\.compact)?\Z")


def has_sink_log(output_dir: Path) -> bool:
    return (output_dir / SINK_LOG).is_dir()


def log_files(output_dir: Path, *, through: int | None = None) -> list[Path]:
    """The sink's log files of batches up to ``through`` (all without it)."""
    folder = output_dir / SINK_LOG
    found = []
    for name in sorted(os.listdir(folder)) if folder.is_dir() else ():
        match = _LOG_FILE.match(name)
        if match and (through is None or int(match.group(1)) <= through):
            found.append(folder / name)
    return found


def committed_names(output_dir: Path, *, through: int | None = None) -> set[str]:
    """The names (in ``output_dir``) of the files the sink committed in batches up to ``through``."""
    names: set[str] = set()
    for log in log_files(output_dir, through=through):
        try:
            lines = log.read_text(errors="replace").splitlines()[1:]  # "v1", then one entry per line
        except FileNotFoundError:
            continue  # an old log file Spark removed after compacting it
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("action", "add") == "add":
                path = urllib.parse.unquote(urllib.parse.urlparse(str(entry.get("path", ""))).path)
                if path:
                    names.add(os.path.basename(path))
    return names


def remove_uncommitted(output_dir: Path) -> list[str]:
    """Delete the data files no log names (written by a micro-batch that failed midway); their names."""
    committed = committed_names(output_dir)
    removed = []
    for entry in sorted(os.scandir(output_dir), key=lambda e: e.name):
        if entry.is_file() and not entry.name.startswith(("_", ".")) and entry.name not in committed:
            os.unlink(entry.path)
            (output_dir / f".{entry.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum beside it
            removed.append(entry.name)
    return removed
