"""Region failover for one DAG run: what a failure, a restarted task and a manual restart do.

* ``handle_failure`` (from the retry policy, in the failing task's worker): record the failure in the
  run's journal, decide with the core (restart strategy + region failover strategy, with live
  partition availability), clear every other started task of the restart set through the REST API,
  and return the decision (retry after its delay, or fail with the suppression reason).
* ``before_work`` (at the start of every stage try): a previous try that failed without a recorded
  decision was killed (SIGKILL, OOM, lost worker), so it is handled now, the same way; then the task
  learns until when it must wait (the restart time of its region), which it spends deferred.
* ``restart_regions`` (manual): restart a task's region and its consumer regions, re-using every
  available upstream partition; not counted against the restart strategy.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from airflow_ft_provider.failover.clock import Clock, SystemClock
from airflow_ft_provider.failover.indexed_name import IndexedName
from airflow_ft_provider.failover.recovery import FailoverDecision, Outcome, RecoveryState, handle_failure
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.partitions import PartitionNotFound, RunRef
from airflow_ft_provider.partitions.errors import Unavailable
from airflow_ft_provider.recovery.clearing import RestartClears
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.recovery.try_start import Proceed, Superseded, TryStart, WaitUntil

log = logging.getLogger(__name__)

LOST = {
    Unavailable.INVALID_MANIFEST,
    Unavailable.MISSING_OBJECT,
    Unavailable.SIZE_MISMATCH,
    Unavailable.CHECKSUM_MISMATCH,
    Unavailable.RELEASED,
}
FAILED_TRY_STATES = {"failed", "up_for_retry"}
KILLED_CAUSE = (
    "the previous try ended without a recorded failure: its process was killed "
    "(SIGKILL, OOM or a lost worker)"
)
# How long a restart's own handler has to finish its clears before the run's next try takes over (a
# handler that was killed never says it gave up; one that met an outage does, at once).
UNFINISHED_GRACE = 600.0
# How long a try waits (deferred) before it tries again to finish a restart the REST API could not
# carry out: an outage of the API server delays the run, it does not fail tries or count as failures.
RECONCILE_RETRY = 20.0
# How long a try waits (deferred) before it looks again at a restart whose clears are under way in
# another worker and that restarts this task or its producers.
PENDING_CLEARS_WAIT = 5.0


def _api_unavailable(err: BaseException) -> bool:
    from airflow_ft_provider.hooks.airflow_api import api_unavailable

    return api_unavailable(err)


def mask_secrets(text: str) -> str:
    """``text`` with every secret Airflow's secrets masker knows replaced by ``***``: the connections this
    process has read (the task SDK's masker, and the core one where the API server has read them). Causes
    are stored in S3 and shown on the failover page, which Airflow's log masking does not cover."""
    from airflow_ft_provider._compat import redact_secrets

    return redact_secrets(text)


def describe_exception(exc: BaseException) -> str:
    """``Type: first line of the message``, secrets masked (before cutting, so no part of one survives)."""
    message = mask_secrets(str(exc)).strip()
    text = message.splitlines()[0] if message else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


class RegionFailover:
    def __init__(
        self,
        pipeline: PipelineDescription,
        run_id: str,
        *,
        api: Any = None,
        clock: Clock | None = None,
        store: Any = None,
    ) -> None:
        self.pipeline = pipeline
        self.run = RunRef(pipeline.dag_id, run_id)
        if store is None:
            from airflow_ft_provider.recovery.locator import partition_store

            store = partition_store(pipeline)
        self.store = store
        self.journal = RecoveryJournal(self.store, self.run)
        self.clock = clock or SystemClock()
        self._api = api
        self.clears = RestartClears(pipeline, self.run, self.journal, self._rest)

    @contextmanager
    def _rest(self) -> Iterator[Any]:
        """The REST client for one operation: the one given, else a hook of the pipeline's ``airflow_api``
        connection, closed afterwards (a RegionFailover is made per failure; its sockets must not linger)."""
        if self._api is not None:
            yield self._api
            return
        from airflow_ft_provider.hooks.airflow_api import AirflowApiHook

        with AirflowApiHook(self.pipeline.airflow_api_conn_id) as hook:
            yield hook

    # -- failures -----------------------------------------------------------------------------------
    def handle_failure(
        self,
        task_id: str,
        map_index: int | None,
        try_number: int,
        cause: BaseException | str,
        *,
        keep_running: Iterable[str] = (),
    ) -> FailoverDecision:
        core_task = self.pipeline.core_task_id(task_id, map_index)
        unavailable = self.unavailable_partitions(cause)
        text = mask_secrets(cause) if isinstance(cause, str) else describe_exception(cause)
        failover = self.pipeline.failover_strategy()
        key = f"{core_task}#{try_number}"
        keep = {core_task, *keep_running}

        def decide(state: RecoveryState) -> FailoverDecision:
            decision = handle_failure(
                state,
                failover=failover,
                restart_config=self.pipeline.restart_config,
                failed_task=core_task,
                try_number=try_number,
                cause=text,
                unavailable=unavailable,
                clock=self.clock,
                partitions_persisted=True,
                per_region=self.pipeline.per_region_restarts,
            )
            others = sorted(decision.tasks - keep)
            if decision.outcome is Outcome.RESTART and not decision.already_handled and others:
                # Saved with the decision: if the REST API cannot be reached for the clears below, the
                # next try (of any task of the run) that sees this finishes them.
                state.unfinished[key] = {"tasks": others, "decided_at": self.clock.now()}
            return decision

        decision = self.journal.update(decide)
        if decision.superseded:
            log.info("%s", decision.reason)
            return decision
        if decision.already_handled:
            log.info("failure of %s try %d was already handled: %s", core_task, try_number, decision.reason)
            self.finish_unfinished()
            return decision
        log.warning("%s", decision.reason)
        try:
            cleared = self._finish(key)
        except Exception as err:
            if not _api_unavailable(err):
                raise
            # The decision stands (it is in the journal, marked unfinished): the failing task retries
            # after its delay, and the run's next try clears the rest once the API answers.
            log.warning("the REST API could not clear the restart set (%s): the run's next try does", err)
            cleared = []
        self.journal.record(
            {
                "time": self.clock.now(),
                "kind": "failover",
                "task": core_task,
                **decision.summary(),
                "cleared": cleared,
                "strategy_state": self.journal.load().strategies.get(decision.scope),
            }
        )
        return decision

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

    def finish_unfinished(self) -> list[str]:
        """Finish every restart whose clears did not all happen (the REST API was unreachable): clear
        the tasks of its restart set that still run (or ran) the try it meant to end.

        Only restarts their own handler gave up on, or whose handler has had ``UNFINISHED_GRACE`` to
        finish (it may have been killed): a handler still at work must not be raced, or a task it has
        just restarted would be cleared a second time."""
        cleared: list[str] = []
        for key in sorted(self.journal.load().unfinished):
            if not self.journal.update(functools.partial(self._claim, key=key)):
                continue
            log.warning("finishing the restart decided for %s: its clears did not all happen", key)
            done = self._finish(key)
            cleared.extend(done)
            if done:
                self.journal.record(
                    {
                        "time": self.clock.now(),
                        "kind": "reconciled",
                        "task": key.rpartition("#")[0],
                        "cleared": done,
                        "reason": f"finished the clears of the restart decided for {key}",
                    }
                )
        return cleared

    def _claim(self, state: RecoveryState, key: str) -> bool:
        """Take over an unfinished restart (compare-and-swap: one taker at a time), if nobody holds it:
        its handler or an earlier taker gave up, or has held it for ``UNFINISHED_GRACE``."""
        entry = state.unfinished.get(key)
        if entry is None:
            return False
        now = self.clock.now()
        held_since = max(entry["decided_at"], entry.get("claimed_at") or 0.0)
        if not entry.get("abandoned") and now - held_since < UNFINISHED_GRACE:
            return False
        entry["abandoned"], entry["claimed_at"] = False, now
        return True

    def _abandon(self, key: str) -> None:
        def abandoned(state: RecoveryState) -> None:
            if key in state.unfinished:
                state.unfinished[key]["abandoned"] = True

        try:
            self.journal.update(abandoned)
        except Exception as err:  # noqa: BLE001 - the store may be down too: the grace period covers it
            log.warning("could not mark the restart of %s as unfinished (%s)", key, err)

    def _finish(self, key: str) -> list[str]:
        """Clear the other started tasks of the unfinished restart ``key``, then mark it finished; on a
        failure, mark it abandoned, for the run's next try to finish (``finish_unfinished``)."""

        def finished(state: RecoveryState) -> None:
            state.unfinished.pop(key, None)

        try:
            entry = self.journal.load().unfinished.get(key)
            if entry is None:
                return []
            cleared = self.clears.clear_started(entry["tasks"], unfinished=key, ended=entry.get("ended", {}))
            self.journal.update(finished)
        except BaseException:  # also a try terminated meanwhile (SIGTERM): say so, or it waits the grace
            self._abandon(key)
            raise
        return cleared

    # -- the start of a try -------------------------------------------------------------------------
    def before_work(self, task_id: str, map_index: int | None, try_number: int) -> TryStart:
        """Reconcile an unhandled previous failure; then say whether this try proceeds, waits for its
        region's restart time, or was superseded (cleared: its producers restart first)."""
        core_task = self.pipeline.core_task_id(task_id, map_index)
        try:
            reconciled, state = self._reconcile(task_id, map_index, try_number)
        except Exception as err:
            if not _api_unavailable(err):
                raise
            log.warning("%s try %d: %s", core_task, try_number, err)
            return WaitUntil(
                self.clock.now() + RECONCILE_RETRY,
                reason="the Airflow REST API is unreachable: a restart of this run must be finished first",
            )
        if reconciled is not None:
            return reconciled
        # A restart still clearing this task or its producers in another worker: wait for its clears, or
        # this try would read the data they replace.
        pending = state.pending_restart_of({core_task} | self.pipeline.upstream_tasks(core_task))
        if pending is not None:
            return WaitUntil(
                self.clock.now() + PENDING_CLEARS_WAIT,
                reason=f"the restart decided for {pending} is clearing its tasks, this one or its producers",
            )
        stale = self._superseded_producers(task_id, map_index, state)
        if stale:
            return self._restart_after(core_task, stale)
        not_before = state.restart_not_before(core_task)
        if not_before is not None and not_before > self.clock.now():
            return WaitUntil(not_before)
        return Proceed()

    def _reconcile(
        self, task_id: str, map_index: int | None, try_number: int
    ) -> tuple[Superseded | None, RecoveryState]:
        """Finish what earlier failures left undone before this try works: restarts whose clears did not
        all happen, and a previous try of this task that ended without a recorded failure (killed).
        Superseded when that restarts this try's producers (or this very try); with the journal's state
        as it stands afterwards (read once when there was nothing to do)."""
        core_task = self.pipeline.core_task_id(task_id, map_index)
        state = self.journal.load()
        restarted: set[str] = set()
        if state.unfinished:
            restarted.update(self.finish_unfinished())
            state = self.journal.load()
            if core_task in restarted:  # this try was listed to end: the clear already stopped it
                return Superseded(f"{core_task} was cleared by the restart it finished"), state
        previous = try_number - 1
        if previous >= 1 and not state.accounts_for(core_task, previous):
            key = self.pipeline.airflow_key(core_task)
            with self._rest() as api:
                earlier = api.task_instance_try(self.run.pipeline, self.run.run_id, key[0], key[1], previous)
            if earlier.get("state") in FAILED_TRY_STATES:
                log.warning("%s try %d: %s; applying region failover now", core_task, previous, KILLED_CAUSE)
                decision = self.handle_failure(
                    task_id, map_index, previous, KILLED_CAUSE, keep_running=[core_task]
                )
                if decision.restart:
                    restarted.update(decision.tasks)
                state = self.journal.load()
        producers = restarted & self.pipeline.upstream_tasks(core_task)
        return (self._restart_after(core_task, producers) if producers else None), state

    def _restart_after(self, core_task: str, producers: set[str]) -> Superseded:
        """This try started before its producers were cleared: let it go too, so that Airflow starts the
        next try only once they have run again."""
        names = ", ".join(sorted(producers))
        log.warning("%s restarts after %s", core_task, names)
        self.clears.clear_started([core_task])
        return Superseded(f"{core_task} restarts after {names}")

    def _superseded_producers(self, task_id: str, map_index: int | None, state: RecoveryState) -> set[str]:
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

    # -- manual control -----------------------------------------------------------------------------
    def restart_regions(
        self, task: str, *, reason: str = "manual restart", user: str | None = None
    ) -> list[str]:
        """Restart ``task``'s region (every index's, for a mapped stage's name) and the consumer regions
        now, re-using available upstream partitions.

        Refused with :class:`DamagedJournal` before anything is cleared when the run's recovery state
        cannot be trusted: the restart writes it, and the next failure's decision reads it."""
        named = self.pipeline.tasks_named(task)  # a clear error for a name that is not in the pipeline
        failover, unavailable = self.pipeline.failover_strategy(), self.unavailable_partitions()
        regions = list(dict.fromkeys(r for t in named for r in failover.regions_to_restart(t, unavailable)))
        tasks = set().union(*regions)

        def no_waiting(state: RecoveryState) -> None:
            self.journal.check_budgets(state, self.pipeline)  # raises before anything is written
            for name in tasks:
                state.not_before.pop(name, None)

        self.journal.update(no_waiting)
        cleared = self.clears.clear_started(tasks)
        self.journal.record(
            {
                "time": self.clock.now(),
                "kind": "manual",
                "task": task,
                "reason": reason,
                "regions": [sorted(r) for r in regions],
                "tasks": sorted(tasks),
                "cleared": cleared,
                **({"user": user} if user else {}),
            }
        )
        return cleared
