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


@dataclass(frozen=True)
class _Seen:
    """A process as the sampler knows it: its part, its title, the ticks it had spent when last read."""

    part: str
    title: str
    ticks: int


@dataclass
class CpuSampler:
    """``with CpuSampler() as cpu: ...`` then ``cpu.seconds``: core-seconds per part."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    by_command: dict[str, float] = field(default_factory=dict)  # the same, per process title (60 chars)
    _seen: dict[tuple[int, int], _Seen] = field(default_factory=dict)  # by (pid, start time)
    _started_ticks: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> CpuSampler:
        self._started_ticks = _uptime_ticks()
        self._seen = dict(_processes(self._seen))  # what they had spent before: not this stretch's
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
        for key, now in _processes(self._seen):
            before = self._seen.get(key)
            # new since the last sample: all of it, if it started in the stretch
            spent_before = before.ticks if before else (0 if key[1] >= self._started_ticks else now.ticks)
            spent = (now.ticks - spent_before) / TICK
            if spent:
                self.seconds[now.part] += spent
                self.by_command[now.title] = self.by_command.get(now.title, 0.0) + spent
            self._seen[key] = now


def machine_busy_seconds() -> float:
    """Core-seconds this machine has spent busy since boot (``/proc/stat``: all but idle and iowait),
    whatever process spent them: Spark, S3, Airflow alike. The difference over a run is the work the run
    made the machine do, which no schedule can fit into less than that over the cores."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, stat.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / TICK


def _processes(known: dict[tuple[int, int], _Seen]) -> list[tuple[tuple[int, int], _Seen]]:
    """(pid, start time) and what is seen of every process readable now; a known process's part and
    title are not read again. A process whose command line names no part is its parent's (a Spark
    application's Python driver, under spark-submit)."""
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
    commands: dict[int, str] = {}
    parts: dict[int, str] = {}

    def command(pid: int) -> str:
        if pid not in commands:
            try:
                commands[pid] = _command(read[pid][2])
            except OSError:
                commands[pid] = ""
        return commands[pid]

    def part(pid: int, depth: int = 0) -> str:
        if pid not in read:
            return "other"
        if pid not in parts:
            key, parent = read[pid][:2]
            found = known[key].part if key in known else part_of(command(pid))
            parts[pid] = part(parent, depth + 1) if found == "other" and depth < 50 else found
        return parts[pid]

    seen = []
    for pid, (key, _, _, ticks) in read.items():
        title = known[key].title if key in known else _NUMBERS.sub("*", command(pid))[:60].strip() or "?"
        seen.append((key, _Seen(part(pid), title, ticks)))
    return seen


def _command(entry: Path) -> str:
    return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def _uptime_ticks() -> int:
    return int(float(Path("/proc/uptime").read_text().split()[0]) * TICK)
