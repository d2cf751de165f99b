"""One failover decision for a run: whether, when and what to restart after a task failure.

Flink's ``ExecutionFailureHandler``: built once per run's pipeline with its failover strategy (which
tasks) and its restart strategy's configuration (whether and when, with a budget shared by the whole run
or per region), it takes a ``Failure`` and the run's ``FailoverState``. The caller loads that state,
calls ``handle`` and stores it back with a compare-and-swap, retrying on conflict, so two regions
failing at once never lose an update. How the state is stored is the caller's business
(``recovery/journal_schema.py``); the core keeps only what Flink's scheduler keeps, and renders no
sentences (``recovery/wording.py`` does).

Handling is idempotent per (task, try): a failure seen twice (the retry policy ran, and the next try
also finds it when reconciling a hard crash) is counted once.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from .backoff import Backoff
from .classification import FailureLabels
from .clock import Clock
from .decision import FailoverDecision, Outcome, TryKey
from .failover_strategies import FailoverStrategy
from .restart_config import restart_strategy_factory
from .strategy_state import StrategyState

RUN_SCOPE = "run"
__all__ = [
    "RUN_SCOPE",
    "ExecutionFailureHandler",
    "FailoverDecision",
    "FailoverState",
    "Failure",
    "Outcome",
    "TryKey",
    "scope_of",
]


@dataclass
class FailoverState:
    """What a run remembers between failures, in whichever worker they happen."""

    strategies: dict[str, StrategyState] = field(default_factory=dict)  # scope -> restart strategy state
    not_before: dict[str, float] = field(default_factory=dict)  # task id -> earliest restart time
    handled: dict[str, int] = field(default_factory=dict)  # task id -> highest try whose failure was handled
    decisions: dict[TryKey, FailoverDecision] = field(default_factory=dict)
    superseded: dict[str, int] = field(
        default_factory=dict
    )  # task id -> highest try ended by a failover clear

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

    def mark_superseded(self, task_id: str, try_number: int) -> None:
        """A failover restart ends (or ended) ``try_number`` of ``task_id``: its failure is no new one."""
        self.superseded[task_id] = max(self.superseded.get(task_id, 0), try_number)


def scope_of(strategy: FailoverStrategy, task_id: str, per_region: bool) -> str:
    """The key of the restart budget a failure counts against: the run, or the task's region."""
    if not per_region:
        return RUN_SCOPE
    return "region:" + min(strategy.region_of(task_id))


@dataclass(frozen=True)
class Failure:
    """One failed try: ``task`` (``stage`` or ``stage[i]``) and its try number, the cause in words, the
    input partitions it found unavailable, and its classification (None: recoverable)."""

    task: str
    try_number: int
    cause: str
    unavailable: tuple[str, ...] = ()
    labels: FailureLabels | None = None

    @property
    def key(self) -> TryKey:
        return TryKey(self.task, self.try_number)


class ExecutionFailureHandler:
    """Decides on failures of one run's pipeline; the restart configuration is read once, here."""

    def __init__(
        self,
        failover: FailoverStrategy,
        restart_config: Mapping[str, object],
        *,
        clock: Clock,
        rng: random.Random | None = None,
        partitions_persisted: bool = True,
        per_region: bool = False,
        describe_backoff: Callable[[Backoff], str] = lambda backoff: "",
    ) -> None:
        self.failover = failover
        self.clock = clock
        self.per_region = per_region
        self.describe_backoff = describe_backoff  # the words are the caller's (recovery/wording.py)
        # Read and validated once (an invalid configuration fails here); each decision takes a strategy
        # with a fresh budget from it and restores its scope's budget into that.
        self._new_strategy = restart_strategy_factory(
            restart_config, clock=clock, rng=rng, partitions_persisted=partitions_persisted
        )

    def handle(
        self, state: FailoverState, failure: Failure, *, being_ended: Collection[str] = ()
    ) -> FailoverDecision:
        """Record ``failure`` in ``state`` and decide; ``state`` is updated in place.

        ``being_ended``: tasks whose running try a restart decided earlier is about to end (its clears
        are under way): their failure is that restart's doing, not a new one. A failure labelled not
        recoverable is decided without the restart strategy (no restart, and none counted)."""
        key, cause, labels = failure.key, failure.cause, failure.labels
        failed_task, try_number = failure.task, failure.try_number
        if state.handled.get(failed_task, 0) >= try_number and key in state.decisions:
            return state.decisions[key].replayed()
        now = self.clock.now()
        if state.superseded.get(failed_task, 0) >= try_number or failed_task in being_ended:
            # Failover itself stopped this try (cleared while running), or a restart decided before
            # this failure is about to (its clears are under way): its end is not a new failure.
            return FailoverDecision.stopped_by_failover(key, cause=cause, decided_at=now)
        if labels is not None and not labels.recoverable:
            decision = FailoverDecision.not_recoverable(key, cause=cause, decided_at=now, labels=labels)
            return _handled(state, key, decision)
        lost = tuple(sorted(set(failure.unavailable)))
        scope = scope_of(self.failover, failed_task, self.per_region)
        strategy = self._new_strategy()
        if scope in state.strategies:
            strategy.restore_state(state.strategies[scope])
        new_attempt = strategy.notify_failure()
        if strategy.can_restart():
            delay = strategy.backoff_seconds()
            decision = FailoverDecision.restartable(
                key,
                cause=cause,
                decided_at=now,
                regions=tuple(self.failover.regions_to_restart(failed_task, lost)),
                delay=delay,
                unavailable=lost,
                new_attempt=new_attempt,
                strategy=repr(strategy),
                scope=scope,
                labels=labels,
                backoff=self.describe_backoff(strategy.last_backoff()) if new_attempt else "",
            )
            for task in decision.tasks:
                state.not_before[task] = max(state.not_before.get(task, 0.0), now + delay)
        else:
            decision = FailoverDecision.unrecoverable(
                key, cause=cause, decided_at=now, strategy=repr(strategy), scope=scope, labels=labels
            )
        state.strategies[scope] = strategy.export_state()
        return _handled(state, key, decision)


def _handled(state: FailoverState, key: TryKey, decision: FailoverDecision) -> FailoverDecision:
    state.handled[key.task] = max(state.handled.get(key.task, 0), key.try_number)
    state.decisions[key] = decision
    return decision
