"""Restarts whose clears are under way: the REST API's side of a decision, beside the core's state.

A restart is decided in one worker and carried out through the Airflow REST API (clears of the other
started tasks of its restart set). Until every clear has happened it is *pending*: saved with the
decision, so that whoever sees it first finishes it if its handler cannot (the API server was
unreachable, or the handler was killed). One taker at a time: a handler holds it; a later try claims
it when the handler gave up (abandoned) or has held it for the grace period.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from airflow_ft_provider.failover.decision import TryKey
from airflow_ft_provider.failover.failure_handler import FailoverState

# How long a restart's own handler has to finish its clears before the run's next try takes over (a
# handler that was killed never says it gave up; one that met an outage does, at once).
UNFINISHED_GRACE = 600.0


@dataclass(frozen=True)
class PendingRestart:
    """A decided restart whose other tasks are not all cleared yet."""

    tasks: tuple[str, ...]  # the other started tasks of its restart set, to clear
    decided_at: float
    ended: Mapping[str, int] = field(default_factory=dict)  # task -> the try a clear attempt listed to end
    abandoned: bool = False  # its handler gave up on the clears
    claimed_at: float | None = None  # when a later try took it over (None: its handler holds it)

    @property
    def to_end(self) -> frozenset[str]:
        """Tasks whose running try this restart has not ended yet (its clear will)."""
        return frozenset(self.tasks) - frozenset(self.ended)

    def claimable(self, now: float, *, grace: float = UNFINISHED_GRACE) -> bool:
        """Nobody holds it: its handler (or an earlier taker) gave up, or has held it for ``grace``."""
        held_since = max(self.decided_at, self.claimed_at or 0.0)
        return self.abandoned or now - held_since >= grace

    def claimed(self, now: float) -> PendingRestart:
        return dataclasses.replace(self, abandoned=False, claimed_at=now)

    def abandon(self) -> PendingRestart:
        return dataclasses.replace(self, abandoned=True)

    def ending(self, task: str, try_number: int) -> PendingRestart:
        """Its clear of ``task`` is (about to be) sent and ends ``try_number``."""
        return dataclasses.replace(self, ended={**self.ended, task: try_number})


@dataclass
class RunState(FailoverState):
    """What a run's journal holds: the core's recovery state and the restarts whose clears are pending."""

    pending: dict[TryKey, PendingRestart] = field(default_factory=dict)

    def pending_restart_of(self, tasks: Iterable[str]) -> TryKey | None:
        """The key of a pending restart that lists one of ``tasks`` and has not ended a try of it yet:
        its clear will end the try that runs now (a later try, started after that clear, is not
        covered). None when there is none."""
        wanted = set(tasks)
        for key, restart in sorted(self.pending.items()):
            if wanted & restart.to_end:
                return key
        return None

    def being_ended(self) -> frozenset[str]:
        """Every task whose running try a pending restart is about to end."""
        return frozenset().union(*(restart.to_end for restart in self.pending.values()))
