"""Garbage collection of a whole partition store: what ``airflow-ft gc`` runs, by hand or on a schedule.

Each run end already sweeps its own pipeline (``partitions/sweep.py``); this is for pipelines that no
longer run, and for orphans. Two rules, both the store's own (``S3PartitionStore``), applied to every
run of every pipeline:

* an ended run (marked when it ends, ``run_end.py``, succeeded or failed) is released once its
  retention has passed, unless a consumer holds a lease on it; its release marker goes one retention
  later;
* in every other run, attempt data that no manifest references (crashed, fenced or superseded commits)
  is removed once it is older than ``partition_store_orphan_grace``, so an in-flight commit is never
  touched.

A run that is still going keeps every committed partition: only its unreferenced attempt data goes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .naming import RunRef
from .store import (
    ALREADY_RELEASED,
    NOT_ENDED,
    RELEASED_MARKER_EXPIRED,
    RetentionOutcome,
    S3PartitionStore,
)


@dataclass
class CollectionReport:
    released: list[RunRef] = field(default_factory=list)
    kept: list[RetentionOutcome] = field(default_factory=list)  # succeeded runs not released, and why
    orphans_deleted: int = 0
    uploads_aborted: int = 0
    markers_expired: int = 0  # release markers removed one retention after their release

    def lines(self) -> list[str]:
        out = [f"released {run} (retention passed)" for run in self.released]
        out += [f"kept {o.run}: {o.reason}" for o in self.kept]
        out.append(
            f"{len(self.released)} runs released, {self.orphans_deleted} orphaned objects deleted, "
            f"{self.uploads_aborted} stale uploads aborted, {self.markers_expired} release markers expired"
        )
        return out


def collect(store: S3PartitionStore, pipelines: Iterable[str] | None = None) -> CollectionReport:
    """Apply both rules to ``pipelines`` (default: every pipeline with data in the store)."""
    report = CollectionReport()
    for pipeline in pipelines if pipelines is not None else store.pipelines():
        for outcome in store.release_expired_runs(pipeline):  # one per run of the pipeline
            if outcome.released:
                report.released.append(outcome.run)
                continue
            if outcome.reason == RELEASED_MARKER_EXPIRED:
                report.markers_expired += 1
            elif outcome.reason not in (NOT_ENDED, ALREADY_RELEASED):
                report.kept.append(outcome)
            orphans = store.cleanup_orphans(outcome.run.pipeline, outcome.run.run_id)
            report.orphans_deleted += len(orphans.deleted_keys)
            report.uploads_aborted += len(orphans.aborted_uploads)
    return report
