"""Where a try's time goes, phase by phase: said once in the task log when the try ends.

A failure-free pipeline costs more than the same work as one Spark application; this line says how much
of a stage's task was the restart gate, the look for an earlier try's output, the resolution of its
inputs, the Spark session, the application, the commit and the release (``bench_recovery_work.py
--failure-free-only`` reads it to break a run's critical path down).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PHASES = ("gate", "reuse", "session", "inputs", "spark", "commit", "release")  # as a try runs them
LOG_PREFIX = "stage try phases (s):"
_LINE = re.compile(re.escape(LOG_PREFIX) + r" (?P<phases>[^;]*); total (?P<total>[0-9.]+)")


@dataclass
class TryPhases:
    """Wall seconds per phase of one try, from the moment the operator's ``execute`` started."""

    started: float = field(default_factory=time.monotonic)
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if name not in PHASES:
            raise ValueError(f"unknown try phase {name!r}; phases: {', '.join(PHASES)}")
        began = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - began

    def summary(self) -> str:
        spent = ", ".join(f"{name} {self.seconds[name]:.2f}" for name in PHASES if name in self.seconds)
        return f"{LOG_PREFIX} {spent or 'none'}; total {time.monotonic() - self.started:.2f}"


def parse_summary(log: str) -> dict[str, float] | None:
    """The phases (and ``total``) of the last summary line in a task log; None if it has none."""
    found = list(_LINE.finditer(log))
    if not found:
        return None
    last = found[-1]
    phases = {}
    for item in last["phases"].split(", "):
        name, _, value = item.partition(" ")
        if name in PHASES:
            phases[name] = float(value)
    phases["total"] = float(last["total"])
    return phases
