"""Where a failure-free run's wall time goes: its critical path, stage by stage (issue 45).

The path is walked back from the task that ended last, each time to the upstream task that ended last
(the one it waited for). Per stage on it: the wait for the scheduler to queue it (from what it waited
for, the upstream's end or the run's start, to ``queued_when``: Airflow's scheduler loop, and a free
slot under ``max_active_tasks``), its start (queued to running: the executor picking it up and starting
its task process), the try's phases as its log says them (``stage_try/phases.py``), and the rest of the
task's recorded time (task process start-up and teardown, DAG file parse, XComs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from airflow_ft_provider.stage_try.phases import PHASES, parse_summary


@dataclass(frozen=True)
class StageOnPath:
    task: str
    queue_s: float
    start_s: float
    task_s: float
    phases: Mapping[str, float]

    @property
    def outside_try_s(self) -> float:
        """The task's recorded time that its try's own clock did not see."""
        return self.task_s - self.phases.get("total", 0.0)


def _at(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def critical_path(
    run_start: str,
    tries: Mapping[str, dict],
    upstream: Mapping[str, str | None],
    log: Callable[[str, int], str],
) -> list[StageOnPath]:
    """``tries``: each task's (last) try as the REST API gives it; ``log(task, try_number)``."""
    path: list[StageOnPath] = []
    task: str | None = max(tries, key=lambda t: _at(tries[t]["end_date"]))
    while task is not None:
        t = tries[task]
        before = upstream.get(task)
        waited_for = _at(tries[before]["end_date"]) if before else _at(run_start)
        queued = _at(t["queued_when"]) if t.get("queued_when") else waited_for
        path.append(
            StageOnPath(
                task,
                queue_s=queued - waited_for,
                start_s=_at(t["start_date"]) - queued,
                task_s=_at(t["end_date"]) - _at(t["start_date"]),
                phases=parse_summary(log(task, t["try_number"])) or {},
            )
        )
        task = before
    return path[::-1]


def summed(path: list[StageOnPath]) -> dict[str, float]:
    """The path's totals per column: queue, start, each phase, outside the try, task."""
    totals = {"queue": sum(s.queue_s for s in path), "start": sum(s.start_s for s in path)}
    for phase in PHASES:
        totals[phase] = sum(s.phases.get(phase, 0.0) for s in path)
    totals["outside_try"] = sum(s.outside_try_s for s in path)
    totals["task"] = sum(s.task_s for s in path)
    return {k: round(v, 2) for k, v in totals.items()}


def table(label: str, path: list[StageOnPath]) -> str:
    """The path as printed lines: one per stage, then the totals."""
    columns = ["queue", "start", *PHASES, "outside_try", "task"]
    lines = [
        f"  {label}: critical path, seconds",
        "    " + f"{'stage':10}" + "".join(f"{c:>12}" for c in columns),
    ]
    for s in path:
        values = [s.queue_s, s.start_s, *(s.phases.get(p, 0.0) for p in PHASES), s.outside_try_s, s.task_s]
        lines.append("    " + f"{s.task:10}" + "".join(f"{v:12.2f}" for v in values))
    totals = summed(path)
    lines.append("    " + f"{'total':10}" + "".join(f"{totals[c]:12.2f}" for c in columns))
    return "\n".join(lines)
