"""Which parts of a deployment on this machine spent its CPU during a measured stretch: Spark, the S3
endpoint, Airflow, the rest.

A run's work is spread over many processes that come and go (task processes, ``spark-submit``, Spark's
Python workers), and a process that ends hands its time to whichever parent reaps it. So the sampler
reads every process's own user and system time (``/proc/<pid>/stat``, children excluded) four times a
second and credits each process's growth to the part its command line names; a process that ends
between two samples loses at most its last quarter second.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
INTERVAL = 0.25  # seconds between samples
PARTS = ("spark", "s3 endpoint", "airflow", "other")
_NUMBERS = re.compile(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d+")  # uuids, pids, ports


def part_of(command: str) -> str:
    """The part a process belongs to, from its command line."""
    if "org.apache.spark" in command or "pyspark" in command or "spark-submit" in command:
        return "spark"
    if "s3_server" in command or "moto" in command:
        return "s3 endpoint"
    if "airflow" in command or "celery" in command:
        return "airflow"
    return "other"


@dataclass
class CpuSampler:
    """``with CpuSampler() as cpu: ...`` then ``cpu.seconds``: core-seconds per part."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    by_command: dict[str, float] = field(default_factory=dict)  # the same, per process title (60 chars)
    _seen: dict[tuple[int, int], tuple[str, int]] = field(default_factory=dict)  # (pid, start) → part, ticks
    _titles: dict[tuple[int, int], str] = field(default_factory=dict)
    _started_ticks: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> CpuSampler:
        self._started_ticks = _uptime_ticks()
        for key, part, ticks in _processes(self._seen):
            self._seen[key] = (part, ticks)  # what they had spent before: not this stretch's
            self._titles[key] = _title(key[0])
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL):
            self._sample()

    def _sample(self) -> None:
        for key, part, ticks in _processes(self._seen):
            before = self._seen.get(key)
            if before is None:  # new since the last sample: all of it, if it started in the stretch
                before = (part, 0 if key[1] >= self._started_ticks else ticks)
                self._titles[key] = _title(key[0])
            spent = (ticks - before[1]) / TICK
            self.seconds[part] += spent
            if spent:
                title = self._titles.get(key, "?")
                self.by_command[title] = self.by_command.get(title, 0.0) + spent
            self._seen[key] = (part, ticks)

    def top(self, count: int = 8) -> list[tuple[str, float]]:
        """The process titles that spent the most."""
        return sorted(self.by_command.items(), key=lambda item: -item[1])[:count]


def _processes(known: dict[tuple[int, int], tuple[str, int]]) -> list[tuple[tuple[int, int], str, int]]:
    """(pid, start time), part, user + system ticks of every process readable now. A process whose
    command line names no part is its parent's (a Spark application's Python driver, under spark-submit)."""
    read: dict[int, tuple[tuple[int, int], int, Path, int]] = {}  # pid → key, parent, entry, ticks
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            key = (int(entry.name), int(fields[19]))  # starttime, in ticks since boot
            read[key[0]] = (key, int(fields[1]), entry, int(fields[11]) + int(fields[12]))  # utime + stime
        except (OSError, ValueError, IndexError):
            continue  # gone while read
    parts: dict[int, str] = {}

    def part(pid: int, depth: int = 0) -> str:
        if pid not in read:
            return "other"
        if pid not in parts:
            key, parent, entry, _ = read[pid]
            try:
                found = known[key][0] if key in known else part_of(_command(entry))
            except OSError:
                found = "other"
            parts[pid] = part(parent, depth + 1) if found == "other" and depth < 50 else found
        return parts[pid]

    return [(key, part(pid), ticks) for pid, (key, _, _, ticks) in read.items()]


def _title(pid: int) -> str:
    """A process's command line, its ids and numbers as ``*`` so that a task's processes group."""
    try:
        command = _command(Path(f"/proc/{pid}"))
    except OSError:
        return "?"
    return _NUMBERS.sub("*", command)[:60].strip() or "?"


def _command(entry: Path) -> str:
    return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def _uptime_ticks() -> int:
    return int(float(Path("/proc/uptime").read_text().split()[0]) * TICK)
