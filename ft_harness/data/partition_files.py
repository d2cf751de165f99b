"""Helpers for partition-store tests: files to commit whose bytes say which commit they belong to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

RUN_ID = "manual__2026-11-22T04:00:00+00:00"  # ':' and '+' as Airflow makes them


def write_files(directory: Path, contents: dict[str, bytes]) -> Path:
    """Create ``contents`` (name -> bytes) under ``directory``; returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in contents.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return directory


def version_files(version: int, count: int = 3, size: int = 2000) -> dict[str, bytes]:
    """Files whose bytes say which commit they belong to (so a mixed read is detectable)."""
    return {
        f"part-{i:04d}.bin": (f"v{version}-f{i}|".encode() * size)[: size + version] for i in range(count)
    }


def read_all(paths: Any) -> dict[str, bytes]:
    return {Path(p).name: Path(p).read_bytes() for p in paths}
