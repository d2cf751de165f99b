"""The start of a stage try: finish what earlier failures left undone, then proceed, wait or step aside.

A previous try that failed without a recorded decision was killed (SIGKILL, OOM, lost worker), so it
is handled now, as the retry policy would have; pending restarts nobody holds are finished. Then the
try learns whether it runs now, waits (deferred) for its region's restart time or for clears under
way, or was superseded: cleared because its producers restart first.
"""

from __future__ import annotations

import logging

from airflow_ft_provider import metrics
from airflow_ft_provider.failover.classification import KILLED
from airflow_ft_provider.failover.decision import Outcome, TryKey
from airflow_ft_provider.failover.indexed_name import IndexedName
from airflow_ft_provider.hooks.api_errors import api_unavailable
from airflow_ft_provider.partitions import PartitionNotFound
from airflow_ft_provider.recovery.clearing import RestApi, RestartClears
from airflow_ft_provider.recovery.decide import FailureHandler
from airflow_ft_provider.recovery.pending import RunState
from airflow_ft_provider.recovery.reconcile import PendingClears
from airflow_ft_provider.recovery.scope import RunScope
from airflow_ft_provider.recovery.try_start import Proceed, Superseded, TryStart, WaitUntil
from airflow_ft_provider.recovery.wording import (
    API_UNREACHABLE_REASON,
    KILLED_CAUSE,
    pending_clears_reason,
    restarts_after,
)

log = logging.getLogger(__name__)

FAILED_TRY_STATES = {"failed", "up_for_retry"}
# How long a try waits (deferred) before it tries again to finish a restart the REST API could not
# carry out: an outage of the API server delays the run, it does not fail tries or count as failures.
RECONCILE_RETRY = 20.0
# How long a try waits (deferred) before it looks again at a restart whose clears are under way in
# another worker and that restarts this task or its producers.
PENDING_CLEARS_WAIT = 5.0


class TryGate:
    def __init__(
        self,
        scope: RunScope,
        *,
        failures: FailureHandler,
        pending: PendingClears,
        clears: RestartClears,
        rest: RestApi,
    ) -> None:
        self.pipeline, self.run, self.store = scope.pipeline, scope.run, scope.store
        self.journal, self.clock = scope.journal, scope.clock
        self.failures, self.pending, self.clears, self.rest = failures, pending, clears, rest

    def before_work(self, task_id: str, map_index: int | None, try_number: int) -> TryStart:
        """Reconcile an unhandled previous failure; then say whether this try proceeds, waits for its
        region's restart time, or was superseded (cleared: its producers restart first)."""
        core_task = self.pipeline.core_task_id(task_id, map_index)
        try:
            reconciled, state = self._reconcile(task_id, map_index, try_number)
        except Exception as err:
            if not api_unavailable(err):
                raise
            log.warning("%s try %d: %s", core_task, try_number, err)
            return WaitUntil(self.clock.now() + RECONCILE_RETRY, reason=API_UNREACHABLE_REASON)
        if reconciled is not None:
            return reconciled
        # A restart still clearing this task or its producers in another worker: wait for its clears, or
        # this try would read the data they replace.
        pending = state.pending_restart_of({core_task} | self.pipeline.upstream_tasks(core_task))
        if pending is not None:
            return WaitUntil(self.clock.now() + PENDING_CLEARS_WAIT, reason=pending_clears_reason(pending))
        stale = self._superseded_producers(task_id, map_index, state)
        if stale:
            return self._restart_after(core_task, stale)
        not_before = state.restart_not_before(core_task)
        if not_before is not None and not_before > self.clock.now():
            return WaitUntil(not_before)
        # This try is the restart of its own previous try's failure: how long the restart took.
        failed = state.decisions.get(TryKey(core_task, try_number - 1)) if try_number > 1 else None
        if failed is not None and failed.outcome is Outcome.RESTART:
            took = self.clock.now() - failed.decided_at
            metrics.restarting(took, dag_id=self.run.pipeline, task_id=core_task)
        return Proceed()

    def _reconcile(
        self, task_id: str, map_index: int | None, try_number: int
    ) -> tuple[Superseded | None, RunState]:
        """Finish what earlier failures left undone before this try works: restarts whose clears did not
        all happen, and a previous try of this task that ended without a recorded failure (killed).
        Superseded when that restarts this try's producers (or this very try); with the journal's state
        as it stands afterwards (read once when there was nothing to do)."""
        core_task = self.pipeline.core_task_id(task_id, map_index)
        state = self.journal.load()
        restarted: set[str] = set()
        if state.pending:
            restarted.update(self.pending.finish_all())
            state = self.journal.load()
            if core_task in restarted:  # this try was listed to end: the clear already stopped it
                return Superseded(f"{core_task} was cleared by the restart it finished"), state
        previous, ended_as = self._last_try_that_ran(core_task, try_number, state)
        if ended_as in FAILED_TRY_STATES:
            log.warning("%s try %d: %s; applying region failover now", core_task, previous, KILLED_CAUSE)
            decision = self.failures.handle(
                task_id, map_index, previous, KILLED_CAUSE, keep_running=[core_task], labels=KILLED
            )
            if decision.outcome is Outcome.RESTART:
                restarted.update(decision.tasks)
            state = self.journal.load()
        producers = restarted & self.pipeline.upstream_tasks(core_task)
        return (self._restart_after(core_task, producers) if producers else None), state

    def _last_try_that_ran(self, core_task: str, try_number: int, state: RunState) -> tuple[int, str | None]:
        """The newest earlier try the journal does not account for, and the state it ended in, skipping
        the tries that never started: while the API server is down a worker cannot start a try, Airflow
        fails it without a record (tries 2-5 of a try 1 lost then), and such a try is no failure of the
        stage. No state (None) when every earlier try is accounted for or never started."""
        airflow_task, airflow_index = self.pipeline.airflow_key(core_task)
        previous = try_number - 1
        while previous >= 1 and not state.accounts_for(core_task, previous):
            with self.rest() as api:
                ended_as = api.try_state(
                    self.run.pipeline, self.run.run_id, airflow_task, airflow_index, previous
                )
            if ended_as is not None:
                return previous, ended_as
            log.info("%s try %d never started (Airflow keeps no record of it)", core_task, previous)
            previous -= 1
        return previous, None

    def _restart_after(self, core_task: str, producers: set[str]) -> Superseded:
        """This try started before its producers were cleared: let it go too, so that Airflow starts the
        next try only once they have run again."""
        reason = restarts_after(core_task, producers)
        log.warning("%s", reason)
        self.clears.clear_started([core_task])
        return Superseded(reason)

    def _superseded_producers(self, task_id: str, map_index: int | None, state: RunState) -> set[str]:
        """Producers of this try's blocking inputs whose committed output was made by a try a restart has
        since ended: they run again, and this try must read what they make next."""
        stale: set[str] = set()
        if not state.superseded:
            return stale
        for result, partition_ids in self.pipeline.consumed_partitions(task_id, map_index).items():
            produced = self.pipeline.graph.results[result]
            if not produced.result_type.is_reconsumable:  # pipelined: restarts with its consumers' region
                continue
            for partition_id in partition_ids:
                producer = str(IndexedName(produced.producer, IndexedName.parse(partition_id).index))
                ended = state.superseded.get(producer, 0)
                if not ended:
                    continue
                try:
                    made_by = self.store.manifest(self.run.parse(partition_id)).producer.try_number
                except PartitionNotFound:
                    continue  # not committed: Airflow does not start a consumer before its producer
                if made_by <= ended:
                    stale.add(producer)
        return stale
