"""The life cycle that runs itself: a bounded, rate-limited sweep of one pipeline's expired runs
(``PartitionRetention.sweep_expired_runs``; this module holds retention's contracts: its defaults,
reports and outcomes).

Every run end (``run_end.py``) marks its run ended (succeeded or failed) and then sweeps its pipeline:
at most once per ``every`` seconds (a marker next to the pipeline's runs says when the last sweep
started), releasing at most ``max_releases`` runs whose retention has passed. So a pipeline that keeps
running keeps its bucket bounded with no cron job and no extra DAG, and one run end never spends long
deleting. Why not a maintenance DAG the provider ships: it must be deployed, scheduled and given worker
slots by someone, and it runs even for pipelines that no longer exist; the run end is already there, in
the DAG processor, with the pipeline's own store and connections. What it cannot see: a pipeline that
never runs again keeps its last runs (bounded, and released by ``airflow-ft gc``).

Which runs have ended comes from two places: the run's own end marker (written by the run-end
callback) and, when the caller can ask Airflow, the orchestrator's view (:class:`RunStates`): runs
marked failed or successful by hand (Airflow gives them no DAG callback) and runs cleared after they
ended (active again: never released, whatever their marker says).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .naming import RunRef

DEFAULT_SWEEP_EVERY = 3600.0
DEFAULT_SWEEP_MAX_RELEASES = 20


@dataclass(frozen=True)
class RetentionOutcome:
    """What a sweep did with one run: released it, or kept it and why."""

    run: RunRef
    released: bool
    reason: str


@dataclass(frozen=True)
class RunStates:
    """What the orchestrator says of a pipeline's runs: when each ended run ended (hand-marked runs
    included; the runs a caller asks about may be only those ended before some cutoff), and which runs
    are queued or running (cleared after they ended)."""

    ended_at: Mapping[str, float] = field(default_factory=dict)
    active: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SweepLimits:
    """How often a pipeline is swept and how much one sweep may release."""

    every: float = DEFAULT_SWEEP_EVERY
    max_releases: int = DEFAULT_SWEEP_MAX_RELEASES

    def __post_init__(self) -> None:
        if not self.every >= 0:
            raise ValueError(f"sweep interval must be >= 0 s, got {self.every!r}")
        if self.max_releases < 1:
            raise ValueError(f"a sweep must release at least 1 run, got {self.max_releases!r}")


@dataclass(frozen=True)
class SweepReport:
    """One sweep: what it released, and what it kept and why."""

    pipeline: str
    outcomes: tuple[RetentionOutcome, ...]

    @property
    def released(self) -> list[str]:
        return [o.run.run_id for o in self.outcomes if o.released]

    def summary(self, *, most: int = 5) -> str:
        """One line; the first ``most`` kept runs say why they were kept (an operator's first question)."""
        kept = [o for o in self.outcomes if not o.released]
        why = "; ".join(f"{o.run.run_id}: {o.reason}" for o in kept[:most])
        more = f"; and {len(kept) - most} more" if len(kept) > most else ""
        return f"swept pipeline {self.pipeline}: released {len(self.released)} runs, kept {len(kept)}" + (
            f" ({why}{more})" if kept else ""
        )


DEFAULT_RETENTION = 7 * 24 * 3600.0


DEFAULT_ORPHAN_GRACE = 3600.0


# Reasons of release_expired_runs for runs it does not consider (not what a sweep reports as kept).
NOT_ENDED = "run has not ended (or was not marked)"


ALREADY_RELEASED = "already released"


# Next to a pipeline's runs: when its last life-cycle sweep started (sweep_expired_runs).
SWEEP_MARKER = "_sweep.json"


# The outcome of a released run whose marker outlived a second retention period and was removed.
RELEASED_MARKER_EXPIRED = "released; its marker expired and was removed"


@dataclass(frozen=True)
class ReleaseReport:
    run: RunRef
    partitions: tuple[str, ...] | None
    deleted_objects: int
    reason: str


@dataclass(frozen=True)
class OrphanReport:
    run: RunRef
    deleted_keys: tuple[str, ...] = ()
    aborted_uploads: tuple[str, ...] = ()
    kept_in_flight: tuple[str, ...] = ()  # attempt prefixes younger than the grace period
