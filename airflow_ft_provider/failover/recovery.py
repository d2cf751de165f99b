"""One failover decision for a run: whether, when and what to restart after a task failure.

Combines the two questions of the core: the restart strategy (whether and when, with state shared by
the whole run or per region) and the failover strategy (which tasks). The run's ``RecoveryState`` is
plain JSON; the caller loads it, calls ``handle_failure`` and stores it back with a compare-and-swap,
retrying on conflict, so two regions failing at once never lose an update.

Handling is idempotent per (task, try): a failure seen twice (the retry policy ran, and the next try
also finds it when reconciling a hard crash) is counted once.
"""

from __future__ import annotations

import enum
import json
import random
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..safe_json import InvalidJson, is_finite_number, load_json
from .clock import Clock
from .durations import format_duration
from .failover_strategies import FailoverStrategy
from .restart_config import load_restart_strategy

STATE_VERSION = 1
MAX_STATE_BYTES = 1 << 20  # the journal's objects are read with this limit too
RUN_SCOPE = "run"


@dataclass
class RecoveryState:
    """What a run remembers between failures, in whichever worker they happen."""

    strategies: dict[str, dict[str, Any]] = field(default_factory=dict)  # scope -> strategy state
    not_before: dict[str, float] = field(default_factory=dict)  # task id -> earliest restart time
    handled: dict[str, int] = field(default_factory=dict)  # task id -> highest try whose failure was handled
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # "task#try" -> decision summary
    superseded: dict[str, int] = field(
        default_factory=dict
    )  # task id -> highest try ended by a failover clear
    # "task#try" -> {"tasks": [...], "decided_at": t}: a restart decided but whose other tasks are not
    # all cleared yet (the REST API was unreachable); whoever sees it first finishes it.
    unfinished: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": STATE_VERSION,
                "strategies": self.strategies,
                "not_before": self.not_before,
                "handled": self.handled,
                "decisions": self.decisions,
                "superseded": self.superseded,
                "unfinished": self.unfinished,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes | None) -> RecoveryState:
        """The stored state, validated: anything else is a ValueError (an ``InvalidJson`` when it is
        not JSON within the limits), never a NaN restart time or a RecursionError."""
        if not data:
            return cls()
        try:
            doc = load_json(data, max_bytes=MAX_STATE_BYTES)
        except InvalidJson as err:
            message = f"the run's recovery state is not JSON ({err}); delete it to start afresh"
            raise InvalidJson(message) from None
        if not isinstance(doc, dict) or doc.get("version") != STATE_VERSION:
            found = reprlib.repr(doc.get("version") if isinstance(doc, dict) else doc)
            raise ValueError(f"unsupported recovery state version {found}; expected {STATE_VERSION}")
        fields = {
            "strategies": dict,
            "not_before": dict,
            "handled": dict,
            "decisions": dict,
            "superseded": dict,
            "unfinished": dict,
        }
        for name, kind in fields.items():
            if not isinstance(doc.get(name, {}), kind):
                got = reprlib.repr(doc.get(name))
                raise ValueError(f"malformed recovery state: {name} must be an object, got {got}")
        for name in ("strategies", "decisions"):
            for key, value in doc[name].items() if name in doc else ():
                if not isinstance(value, dict):
                    raise ValueError(
                        f"malformed recovery state: {name}[{key!r}] must be an object, "
                        f"got {reprlib.repr(value)}"
                    )

        def each(name: str, check: Any) -> dict[str, Any]:
            return {k: check(v, f"{name}[{k!r}]") for k, v in doc.get(name, {}).items()}

        return cls(
            strategies=doc.get("strategies", {}),
            not_before=each("not_before", _number),
            handled=each("handled", _try_number),
            decisions=doc.get("decisions", {}),
            superseded=each("superseded", _try_number),
            unfinished=each("unfinished", _unfinished),
        )

    def restart_not_before(self, task_id: str) -> float | None:
        return self.not_before.get(task_id)

    def restart_pending(self, now: float) -> bool:
        """Whether a decided restart has not reached its restart time yet."""
        return any(at > now for at in self.not_before.values())

    def ended_through(self, task_id: str) -> int:
        """The highest try of ``task_id`` whose end is recorded: a handled failure or a clear by failover."""
        return max(self.handled.get(task_id, 0), self.superseded.get(task_id, 0))

    def accounts_for(self, task_id: str, try_number: int) -> bool:
        """Whether the end of ``try_number`` is explained: a handled failure or a clear by failover."""
        return self.ended_through(task_id) >= try_number

    def pending_restart_of(self, tasks: Iterable[str]) -> str | None:
        """The key of a restart whose clears are not all done that lists one of ``tasks`` and has not ended
        a try of it yet: its clear will end the try that runs now (a later try, started after that clear,
        is not covered). None when there is none."""
        wanted = set(tasks)
        for key, entry in sorted(self.unfinished.items()):
            if wanted & (set(entry["tasks"]) - set(entry.get("ended", {}))):
                return key
        return None


def _unfinished(value: object, where: str) -> dict[str, Any]:
    entry = value if isinstance(value, dict) else {}
    tasks = entry.get("tasks")
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise ValueError(f"malformed recovery state: {where} must name its tasks, got {reprlib.repr(value)}")
    ended = entry.get("ended", {})  # task -> the try a clear attempt listed to end
    if not isinstance(ended, dict):
        got = reprlib.repr(ended)
        raise ValueError(f"malformed recovery state: {where}['ended'] must be an object, got {got}")
    return {
        "tasks": tasks,
        "decided_at": _number(entry.get("decided_at"), f"{where}['decided_at']"),
        "ended": {task: _try_number(n, f"{where}['ended'][{task!r}]") for task, n in ended.items()},
        "abandoned": entry.get("abandoned") is True,  # its handler gave up on the clears
        # When a later try took it over (None: its handler still holds it).
        "claimed_at": None
        if entry.get("claimed_at") is None
        else _number(entry["claimed_at"], f"{where}['claimed_at']"),
    }


def _number(value: object, where: str) -> float:
    # Only JSON numbers: float("nan") of a string would make a restart time that never compares.
    if not is_finite_number(value):
        raise ValueError(
            f"malformed recovery state: {where} must be a time in seconds, got {reprlib.repr(value)}"
        )
    return float(value)


def _try_number(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"malformed recovery state: {where} must be a try number ≥ 0, got {reprlib.repr(value)}"
        )
    return value


class Outcome(enum.Enum):
    """What a failure leads to (Flink's FailureHandlingResult: restartable or unrecoverable), plus the
    case Flink does not have: a try that failover itself stopped (cleared while it ran)."""

    RESTART = "restart"  # the regions in ``regions`` run again at ``restart_at``
    SUPPRESSED = "suppressed"  # the restart strategy allows no more restarts: the run fails
    SUPERSEDED = "superseded"  # stopped by a failover restart: not a failure, nothing to decide


@dataclass(frozen=True)
class FailoverDecision:
    failed_task: str
    try_number: int
    outcome: Outcome
    delay: float  # seconds from the failure until the restart
    restart_at: float
    regions: tuple[frozenset[str], ...]
    tasks: frozenset[str]
    unavailable: tuple[str, ...]
    new_attempt: bool
    strategy: str
    scope: str
    cause: str
    already_handled: bool = False  # replayed from the journal: another try or component decided it

    @property
    def restart(self) -> bool:
        """Whether the failed task runs again (a superseded try runs again too: as part of its restart)."""
        return self.outcome is not Outcome.SUPPRESSED

    @property
    def superseded(self) -> bool:
        return self.outcome is Outcome.SUPERSEDED

    @property
    def reason(self) -> str:
        if self.superseded:
            return (
                f"{self.failed_task} try {self.try_number} was stopped by a failover restart; "
                "not counted as a failure"
            )
        if not self.restart:
            return f"Recovery is suppressed by {self.strategy}"
        what = "; ".join("[" + ", ".join(sorted(r)) + "]" for r in self.regions)
        lost = f"; unavailable partitions: {', '.join(self.unavailable)}" if self.unavailable else ""
        merged = "" if self.new_attempt else " (merged into the restart already scheduled)"
        return (
            f"{self.failed_task} failed ({self.cause}); restarting {len(self.regions)} region(s) {what} "
            f"after {format_duration(self.delay)}{merged}{lost}; strategy {self.strategy}"
        )

    def summary(self) -> dict[str, Any]:
        return {
            "failed_task": self.failed_task,
            "try_number": self.try_number,
            "restart": self.restart,
            "delay": self.delay,
            "restart_at": self.restart_at,
            "regions": [sorted(r) for r in self.regions],
            "tasks": sorted(self.tasks),
            "unavailable": list(self.unavailable),
            "new_attempt": self.new_attempt,
            "strategy": self.strategy,
            "scope": self.scope,
            "cause": self.cause,
            "reason": self.reason,
        }


def scope_of(strategy: FailoverStrategy, task_id: str, per_region: bool) -> str:
    """The key of the restart budget a failure counts against: the run, or the task's region."""
    if not per_region:
        return RUN_SCOPE
    return "region:" + min(strategy.region_of(task_id))


def handle_failure(
    state: RecoveryState,
    *,
    failover: FailoverStrategy,
    restart_config: Mapping[str, object],
    failed_task: str,
    try_number: int,
    cause: str,
    unavailable: Iterable[str] = (),
    clock: Clock,
    rng: random.Random | None = None,
    partitions_persisted: bool = True,
    per_region: bool = False,
) -> FailoverDecision:
    """Record one failure in ``state`` and decide; ``state`` is updated in place."""
    key = f"{failed_task}#{try_number}"
    if state.handled.get(failed_task, 0) >= try_number and key in state.decisions:
        return _from_summary(state.decisions[key])
    if state.superseded.get(failed_task, 0) >= try_number or state.pending_restart_of([failed_task]):
        # Failover itself stopped this try (cleared while running), or a restart decided before this
        # failure is about to (its clears are under way): its end is not a new failure.
        return FailoverDecision(
            failed_task=failed_task,
            try_number=try_number,
            outcome=Outcome.SUPERSEDED,
            delay=0.0,
            restart_at=clock.now(),
            regions=(),
            tasks=frozenset(),
            unavailable=(),
            new_attempt=False,
            strategy="",
            scope="",
            cause=cause,
        )
    lost = tuple(sorted(set(unavailable)))
    scope = scope_of(failover, failed_task, per_region)
    strategy = load_restart_strategy(
        restart_config, clock=clock, rng=rng, partitions_persisted=partitions_persisted
    )
    if scope in state.strategies:
        strategy.restore_state(state.strategies[scope])
    new_attempt = strategy.notify_failure()
    restart = strategy.can_restart()
    now = clock.now()
    delay = strategy.backoff_seconds() if restart else 0.0
    regions: tuple[frozenset[str], ...] = ()
    tasks: frozenset[str] = frozenset()
    if restart:
        regions = tuple(failover.regions_to_restart(failed_task, lost))
        tasks = frozenset().union(*regions)
        for task in tasks:
            state.not_before[task] = max(state.not_before.get(task, 0.0), now + delay)
    state.strategies[scope] = strategy.export_state()
    state.handled[failed_task] = max(state.handled.get(failed_task, 0), try_number)
    decision = FailoverDecision(
        failed_task=failed_task,
        try_number=try_number,
        outcome=Outcome.RESTART if restart else Outcome.SUPPRESSED,
        delay=delay,
        restart_at=now + delay,
        regions=regions,
        tasks=tasks,
        unavailable=lost,
        new_attempt=new_attempt,
        strategy=repr(strategy),
        scope=scope,
        cause=cause,
    )
    state.decisions[key] = decision.summary()
    return decision


def _from_summary(summary: Mapping[str, Any]) -> FailoverDecision:
    return FailoverDecision(
        failed_task=summary["failed_task"],
        try_number=summary["try_number"],
        outcome=Outcome.RESTART if summary["restart"] else Outcome.SUPPRESSED,
        delay=summary["delay"],
        restart_at=summary["restart_at"],
        regions=tuple(frozenset(r) for r in summary["regions"]),
        tasks=frozenset(summary["tasks"]),
        unavailable=tuple(summary["unavailable"]),
        new_attempt=summary["new_attempt"],
        strategy=summary["strategy"],
        scope=summary["scope"],
        cause=summary["cause"],
        already_handled=True,
    )
