"""Clearing the started tasks of a restart set through the Airflow REST API, each try ended once.

A clear ends the try a task runs (or ran) and starts the next one. It is not idempotent, so the try
each clear is meant to end is written to the recovery journal first (the new tries find their old one
explained), and a clear whose answer was lost is looked up before it is sent again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

import tenacity

from airflow_ft_provider.failover.indexed_name import UNMAPPED, IndexedName
from airflow_ft_provider.failover.recovery import RecoveryState
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.recovery.journal import RecoveryJournal

log = logging.getLogger(__name__)

NOT_STARTED = {None, "none", "removed"}
# A clear whose answer was lost is looked up and, if it did not happen, sent again: this often at most.
CLEAR_ATTEMPTS = 4
CLEAR_WAIT = tenacity.wait_exponential(multiplier=1, max=8)


class RestartClears:
    """Clears for one run; ``rest`` opens a REST client for one operation."""

    def __init__(
        self,
        pipeline: PipelineDescription,
        run: RunRef,
        journal: RecoveryJournal,
        rest: Callable[[], AbstractContextManager[Any]],
    ) -> None:
        self.pipeline = pipeline
        self.run = run
        self.journal = journal
        self._rest = rest

    def clear_started(
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
        which needs no clear either). A clear refused with 409 met a concurrent change of one of the
        instances (seen: two task-instance history rows for the same try, as a task ended while being
        cleared); its transaction was rolled back, and it is sent again the same way.
        """
        pending = sorted(ids)
        for attempt in tenacity.Retrying(
            retry=tenacity.retry_if_exception(_worth_another_look),
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
                            "%s moved on since the listing (the lost clear reached it, or a new try started)",
                            ", ".join(str(IndexedName.from_airflow(t, m)) for t, m in done),
                        )
                    pending = [key for key in pending if key not in done]
                    if not pending:
                        return []
                try:
                    return api.clear(self.run.pipeline, self.run.run_id, pending)
                except Exception as err:
                    if _worth_another_look(err):
                        log.warning("%s; reading the task instances again before another clear", err)
                    raise
        return []  # unreachable: the loop returns or re-raises


def _worth_another_look(err: BaseException) -> bool:
    """A clear whose answer was lost, or that a concurrent change of an instance made fail (409)."""
    from airflow_ft_provider.hooks.airflow_api import AirflowApiError, AirflowApiOutcomeUnknown

    if isinstance(err, AirflowApiOutcomeUnknown):
        return True
    return isinstance(err, AirflowApiError) and err.status == 409
