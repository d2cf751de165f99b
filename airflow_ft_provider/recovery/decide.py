"""Deciding on a failure, in the failing task's worker (from the retry policy, or for a killed try).

The failure is recorded in the run's journal and decided with the core (restart strategy + region
failover strategy, with live partition availability); a restart is saved as pending with the
decision, its other started tasks are cleared through the REST API, and the decision goes to the
journal's history.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from functools import cached_property

from airflow_ft_provider import metrics
from airflow_ft_provider.failover.classification import FailureLabels
from airflow_ft_provider.failover.decision import FailoverDecision, Outcome, TryKey
from airflow_ft_provider.failover.failure_handler import ExecutionFailureHandler, Failure
from airflow_ft_provider.failover.strategy_state import StrategyState
from airflow_ft_provider.hooks.api_errors import api_unavailable
from airflow_ft_provider.partitions import PartitionNotFound
from airflow_ft_provider.partitions.errors import Unavailable
from airflow_ft_provider.recovery.journal_schema import failover_event
from airflow_ft_provider.recovery.pending import PendingRestart, RunState
from airflow_ft_provider.recovery.reconcile import PendingClears
from airflow_ft_provider.recovery.scope import RunScope
from airflow_ft_provider.recovery.wording import decision_reason, describe_backoff, describe_cause

log = logging.getLogger(__name__)

LOST = {
    Unavailable.INVALID_MANIFEST,
    Unavailable.MISSING_OBJECT,
    Unavailable.SIZE_MISMATCH,
    Unavailable.CHECKSUM_MISMATCH,
    Unavailable.RELEASED,
}


StopTasks = Callable[[Collection[tuple[str, int]], str], list[tuple[str, int]]]
"""Fails the unfinished ones of these (task id, map index) instances of the run, with a note; those
it asked to fail (``hooks/region_stop.py`` through the REST API)."""


class FailureHandler:
    def __init__(self, scope: RunScope, pending: PendingClears, stop: StopTasks | None = None) -> None:
        self.pipeline, self.run, self.store = scope.pipeline, scope.run, scope.store
        self.journal, self.clock = scope.journal, scope.clock
        self.pending = pending
        self.stop = stop

    @cached_property
    def core(self) -> ExecutionFailureHandler:
        """The core's handler of this run's pipeline, built once (its restart configuration read once)."""
        return ExecutionFailureHandler(
            self.pipeline.failover_strategy(),
            self.pipeline.restart_config,
            clock=self.clock,
            partitions_persisted=True,
            per_region=self.pipeline.per_region_restarts,
            describe_backoff=describe_backoff,
        )

    def handle(
        self,
        task_id: str,
        map_index: int | None,
        try_number: int,
        cause: BaseException | str,
        *,
        keep_running: Iterable[str] = (),
        labels: FailureLabels | None = None,
    ) -> FailoverDecision:
        """Decide on one failed try (once: a failure handled before is replayed), and carry it out.
        ``labels``: the failure's classification (a non-recoverable one restarts nothing)."""
        core_task = self.pipeline.core_task_id(task_id, map_index)
        unavailable = self.unavailable_partitions(cause)
        text = describe_cause(cause)
        key = TryKey(core_task, try_number)
        keep = {core_task, *keep_running}
        after: list[StrategyState | None] = []  # the budget as this decision left it, for its event

        def decide(state: RunState) -> FailoverDecision:
            failure = Failure(core_task, try_number, text, tuple(unavailable), labels)
            decision = self.core.handle(state, failure, being_ended=state.being_ended())
            others = sorted(decision.tasks - keep) if decision.outcome is Outcome.RESTART else []
            if not decision.already_handled and others:
                # Saved with the decision: if the REST API cannot be reached for the clears below, the
                # next try (of any task of the run) that sees this finishes them.
                state.pending[key] = PendingRestart(tuple(others), decided_at=self.clock.now())
            after[:] = [state.strategies.get(decision.scope)]
            return decision

        decision = self.journal.update(decide)
        if not decision.already_handled:
            metrics.decided(decision, dag_id=self.run.pipeline)
        reason = decision_reason(decision)
        if decision.superseded:
            log.info("%s", reason)
            return decision
        if decision.already_handled:
            log.info("failure of %s try %d was already handled: %s", core_task, try_number, reason)
            self.pending.finish_all()
            return decision
        log.warning("%s", reason)
        stopped = self.stop_region(core_task, reason) if decision.outcome is Outcome.NOT_RECOVERABLE else []
        if stopped:
            reason = f"{reason}; stopped the rest of its region: {', '.join(stopped)}"
        try:
            cleared = self.pending.finish(key)
        except Exception as err:
            if not api_unavailable(err):
                raise
            # The decision stands (it is in the journal, pending): the failing task retries after its
            # delay, and the run's next try clears the rest once the API answers.
            log.warning("the REST API could not clear the restart set (%s): the run's next try does", err)
            cleared = []
        self.journal.record(
            failover_event(
                decision,
                time=self.clock.now(),
                task=core_task,
                reason=reason,
                cleared=cleared,
                stopped=stopped,
                strategy_state=after[0],
            )
        )
        return decision

    def stop_region(self, core_task: str, reason: str) -> list[str]:
        """Fail the unfinished other tasks of ``core_task``'s region at once: the region cannot complete,
        so its peers' work is wasted. The tasks it stopped; none when the REST API cannot (they then
        end on their own, and the run fails all the same)."""
        peers = sorted(self.pipeline.failover_strategy().region_of(core_task) - {core_task})
        if not peers or self.stop is None:
            return []
        keys = {self.pipeline.airflow_key(t): t for t in peers}
        note = f"stopped by region failover: {core_task} failed and a restart cannot heal it"
        try:
            stopped = self.stop(list(keys), note)
        except Exception as err:  # noqa: BLE001 - the decision stands; the peers end on their own
            log.warning("could not stop the rest of the region of %s (%s)", core_task, err)
            return []
        names = [keys[k] for k in stopped]
        metrics.stopped(len(names), dag_id=self.run.pipeline, task_id=core_task)
        if names:
            log.warning("stopped the rest of the region of %s: %s (%s)", core_task, ", ".join(names), reason)
        return names

    def unavailable_partitions(self, cause: BaseException | str | None = None) -> set[str]:
        """Partitions that were produced and are lost, plus the one a failure names.

        A partition without a manifest has not been committed yet: it is pending, not lost, and
        backtracking to it would restart producers that are still running (Flink: regions that have
        not been scheduled need no action). A manifest whose objects are gone, truncated or corrupt,
        or a released partition, is lost. A consumer that finds a partition missing names it in its
        PartitionNotFound, which always counts. Pipelined partitions are the core's business.
        """
        report = self.store.check_graph(self.pipeline.graph, self.run.pipeline, self.run.run_id)
        lost = {pid for pid, why in report.unavailable.items() if why.reason in LOST}
        if isinstance(cause, PartitionNotFound):
            lost.add(cause.partition_id)
        return lost
