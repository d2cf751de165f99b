"""Clearing the started tasks of a restart set through the Airflow REST API, each try ended once.

A clear ends the try a task runs (or ran) and starts the next one. It is not idempotent, so the try
each clear is meant to end is written to the recovery journal first (the new tries find their old one
explained), and a clear whose answer was lost is looked up before it is sent again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager

import tenacity

from airflow_ft_provider.failover.decision import TryKey
from airflow_ft_provider.failover.indexed_name import IndexedName
from airflow_ft_provider.hooks.task_instances import TaskInstanceApi, TaskInstanceRow
from airflow_ft_provider.recovery.pending import RunState
from airflow_ft_provider.recovery.scope import RunScope
from airflow_ft_provider.recovery.wording import task_names

RestApi = Callable[[], AbstractContextManager[TaskInstanceApi]]
"""Opens the task-instance API for one operation (a REST client is closed afterwards)."""

log = logging.getLogger(__name__)

NOT_STARTED = {None, "none", "removed"}
# A clear whose answer was lost is looked up and, if it did not happen, sent again: this often at most.
CLEAR_ATTEMPTS = 4
CLEAR_WAIT = tenacity.wait_exponential(multiplier=1, max=8)


class RestartClears:
    """Clears for one run; ``rest`` opens a REST client for one operation."""

    def __init__(self, scope: RunScope, rest: RestApi) -> None:
        self.pipeline, self.run, self.journal = scope.pipeline, scope.run, scope.journal
        self._rest = rest

    def clear_started(
        self, tasks: Iterable[str], *, pending: TryKey | None = None, ended: Mapping[str, int] | None = None
    ) -> list[str]:
        """Clear the tasks of the restart set that have started; the others will simply run later.

        ``ended``: for a restart being finished, the try of each task an earlier attempt already listed
        to end; a task past that try was restarted by that attempt's clear and is left alone."""
        wanted = {self.pipeline.airflow_key(t): t for t in tasks}
        if not wanted:
            return []
        ended = ended or {}
        with self._rest() as api:
            listed = [
                ti
                for ti in api.instances(self.run.pipeline, self.run.run_id)
                if ti.key in wanted
                and ti.state not in NOT_STARTED
                and ti.try_number <= ended.get(wanted[ti.key], ti.try_number)
            ]
            started = {ti.key: ti.try_number for ti in listed}
            if not started:
                return []

            def remember(state: RunState) -> None:
                for key, try_number in started.items():
                    task = wanted[key]
                    state.mark_superseded(task, try_number)
                    if pending is not None and pending in state.pending:
                        state.pending[pending] = state.pending[pending].ending(task, try_number)

            self.journal.update(remember)  # before the clear: the new tries must find it
            cleared = self._clear_once(api, {ti.key: ti.id for ti in listed})
        # The listing may be stale: another failover may have restarted a task in between, so the try
        # this clear ended can be newer than the one seen above. The clear's answer names it.
        newer = {
            ti.key: ti.try_number for ti in cleared if ti.key in started and ti.try_number > started[ti.key]
        }
        if newer:
            started.update(newer)
            self.journal.update(remember)
        names = sorted(wanted[key] for key in started)
        log.warning("restarted %s (cleared through the Airflow REST API)", task_names(names))
        return names

    def _clear_once(
        self, api: TaskInstanceApi, ids: dict[tuple[str, int], str | None]
    ) -> list[TaskInstanceRow]:
        """Clear these instances (key -> the id listed) once, never twice.

        A clear is not idempotent: sent again after it worked, it stops the try it started. So when its
        answer is lost, the instances are read again, and the clear is repeated only for those that still
        have the id listed before (a clear gives every instance it touches a new id; so does a new try,
        which needs no clear either). A clear refused with 409 met a concurrent change of one of the
        instances (seen: two task-instance history rows for the same try, as a task ended while being
        cleared); its transaction was rolled back, and it is sent again the same way.
        """
        remaining = sorted(ids)
        for attempt in tenacity.Retrying(
            retry=tenacity.retry_if_exception(_worth_another_look),
            wait=CLEAR_WAIT,
            stop=tenacity.stop_after_attempt(CLEAR_ATTEMPTS),
            reraise=True,
        ):
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    now = {ti.key: ti.id for ti in api.instances(self.run.pipeline, self.run.run_id)}
                    done = [key for key in remaining if ids[key] is None or now.get(key) != ids[key]]
                    if done:
                        log.warning(
                            "%s moved on since the listing (the lost clear reached it, or a new try started)",
                            ", ".join(str(IndexedName.from_airflow(t, m)) for t, m in done),
                        )
                    remaining = [key for key in remaining if key not in done]
                    if not remaining:
                        return []
                try:
                    return api.clear_instances(self.run.pipeline, self.run.run_id, remaining)
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
