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

import tenacity

from airflow_ft_provider.failover.clock import Clock, SystemClock
from airflow_ft_provider.failover.indexed_name import UNMAPPED, IndexedName
from airflow_ft_provider.failover.recovery import FailoverDecision, Outcome, RecoveryState, handle_failure
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.partitions import PartitionNotFound, RunRef
from airflow_ft_provider.partitions.errors import Unavailable
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.recovery.try_start import Proceed, Superseded, TryStart, WaitUntil

log = logging.getLogger(__name__)

NOT_STARTED = {None, "none", "removed"}
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
# A clear whose answer was lost is looked up and, if it did not happen, sent again: this often at most.
CLEAR_ATTEMPTS = 4
CLEAR_WAIT = tenacity.wait_exponential(multiplier=1, max=8)
# How long a restart's own handler has to finish its clears before the run's next try takes over (a
# handler that was killed never says it gave up; one that met an outage does, at once).
UNFINISHED_GRACE = 600.0


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
        cleared = self._finish(key)
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
            cleared = self._clear_started(entry["tasks"], unfinished=key, ended=entry.get("ended", {}))
            self.journal.update(finished)
        except Exception:
            self._abandon(key)
            raise
        return cleared

    def _clear_started(
        self, tasks: Iterable[str], *, unfinished: str | None = None, ended: dict[str, int] | None = None
    ) -> list[str]:
        """Clear the tasks of the restart set that have started; the others will simply run later.

        ``ended``: for a restart being finished, the try of each task an earlier attempt already listed
        to end; a task past that try was restarted by that attempt's clear and is left alone."""
        wanted = {self.pipeline.airflow_key(t): t for t in tasks}
        if not wanted:
            return []
        ended = ended or {}
        with self._rest() as api:
            instances = api.task_instances(self.run.pipeline, self.run.run_id)
            listed = [
                ti
                for ti in instances
                if (key := (ti["task_id"], ti["map_index"])) in wanted
                and ti.get("state") not in NOT_STARTED
                and ti["try_number"] <= ended.get(wanted[key], ti["try_number"])
            ]
            started = {(ti["task_id"], ti["map_index"]): ti["try_number"] for ti in listed}
            if not started:
                return []

            def remember(state: RecoveryState) -> None:
                for key, try_number in started.items():
                    task = wanted[key]
                    state.superseded[task] = max(state.superseded.get(task, 0), try_number)
                    if unfinished is not None and unfinished in state.unfinished:
                        state.unfinished[unfinished].setdefault("ended", {})[task] = try_number

            self.journal.update(remember)  # before the clear: the new tries must find it
            cleared = self._clear_once(api, {(ti["task_id"], ti["map_index"]): ti.get("id") for ti in listed})
        # The listing may be stale: another failover may have restarted a task in between, so the try
        # this clear ended can be newer than the one seen above. The clear's answer names it.
        newer = {
            key: ti["try_number"]
            for ti in cleared or ()
            if (key := (ti["task_id"], ti.get("map_index", UNMAPPED))) in started
            and ti.get("try_number", 0) > started[key]
        }
        if newer:
            started.update(newer)
            self.journal.update(remember)
        names = sorted(wanted[key] for key in started)
        log.warning("restarted %s (cleared through the Airflow REST API)", ", ".join(names))
        return names

    def _clear_once(self, api: Any, ids: dict[tuple[str, int], str | None]) -> list[dict[str, Any]]:
        """Clear these instances (key -> the id listed) once, never twice.

        A clear is not idempotent: sent again after it worked, it stops the try it started. So when its
        answer is lost, the instances are read again, and the clear is repeated only for those that still
        have the id listed before (a clear gives every instance it touches a new id; so does a new try,
        which needs no clear either).
        """
        from airflow_ft_provider.hooks.airflow_api import AirflowApiOutcomeUnknown

        pending = sorted(ids)
        for attempt in tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(AirflowApiOutcomeUnknown),
            wait=CLEAR_WAIT,
            stop=tenacity.stop_after_attempt(CLEAR_ATTEMPTS),
            reraise=True,
        ):
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    now = {
                        (ti["task_id"], ti["map_index"]): ti.get("id")
                        for ti in api.task_instances(self.run.pipeline, self.run.run_id)
                    }
                    done = [key for key in pending if ids[key] is None or now.get(key) != ids[key]]
                    if done:
                        log.warning(
                            "the lost clear did reach %s",
                            ", ".join(str(IndexedName.from_airflow(t, m)) for t, m in done),
                        )
                    pending = [key for key in pending if key not in done]
                    if not pending:
                        return []
                try:
                    return api.clear(self.run.pipeline, self.run.run_id, pending)
                except AirflowApiOutcomeUnknown as err:
                    log.warning("%s; reading the task instances to learn whether it did", err)
                    raise
        return []  # unreachable: the loop returns or re-raises

    # -- the start of a try -------------------------------------------------------------------------
    def before_work(self, task_id: str, map_index: int | None, try_number: int) -> TryStart:
        """Reconcile an unhandled previous failure; then say whether this try proceeds, waits for its
        region's restart time, or was superseded (cleared: its producers restart first)."""
        core_task = self.pipeline.core_task_id(task_id, map_index)
        state = self.journal.load()
        if state.unfinished:
            self.finish_unfinished()
            state = self.journal.load()
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
                upstream = self.pipeline.upstream_tasks(core_task)
                if decision.restart and decision.tasks & upstream:
                    # This try started before its producers were cleared: let it go too, so that Airflow
                    # starts the next try only once they have run again.
                    producers = ", ".join(sorted(decision.tasks & upstream))
                    log.warning("%s restarts after %s", core_task, producers)
                    self._clear_started([core_task])
                    return Superseded(f"{core_task} restarts after {producers}")
            state = self.journal.load()
        not_before = state.restart_not_before(core_task)
        if not_before is not None and not_before > self.clock.now():
            return WaitUntil(not_before)
        return Proceed()

    # -- manual control -----------------------------------------------------------------------------
    def restart_regions(
        self, task: str, *, reason: str = "manual restart", user: str | None = None
    ) -> list[str]:
        """Restart ``task``'s region and its consumer regions now, re-using available upstream partitions."""
        self.pipeline.airflow_key(task)  # a clear error for a task that is not in the pipeline
        failover = self.pipeline.failover_strategy()
        regions = failover.regions_to_restart(task, self.unavailable_partitions())
        tasks = set().union(*regions)

        def no_waiting(state: RecoveryState) -> None:
            for name in tasks:
                state.not_before.pop(name, None)

        self.journal.update(no_waiting)
        cleared = self._clear_started(tasks)
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
