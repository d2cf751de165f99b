"""Finishing restarts whose clears did not all happen: the claim protocol of pending restarts.

A restart's own handler clears its other tasks right after deciding (``finish``). When the REST API
fails it marks the restart abandoned; when the handler is killed it says nothing. Either way the run's
next try claims it (compare-and-swap on the journal: one taker at a time) and finishes it
(``finish_all``), never racing a handler that is still at work (``pending.UNFINISHED_GRACE``).
"""

from __future__ import annotations

import functools
import logging

from airflow_ft_provider.failover.decision import TryKey
from airflow_ft_provider.recovery.clearing import RestartClears
from airflow_ft_provider.recovery.journal_events import RestartReconciled
from airflow_ft_provider.recovery.pending import RunState
from airflow_ft_provider.recovery.scope import RunScope

log = logging.getLogger(__name__)


class PendingClears:
    def __init__(self, scope: RunScope, clears: RestartClears) -> None:
        self.journal, self.clock = scope.journal, scope.clock
        self.clears = clears

    def finish(self, key: TryKey) -> list[str]:
        """Clear the other started tasks of the pending restart ``key``, then mark it finished; on a
        failure, mark it abandoned, for the run's next try to finish (``finish_all``)."""

        def finished(state: RunState) -> None:
            state.pending.pop(key, None)

        try:
            restart = self.journal.load().pending.get(key)
            if restart is None:
                return []
            cleared = self.clears.clear_started(restart.tasks, pending=key, ended=restart.ended)
            self.journal.update(finished)
        except BaseException:  # also a try terminated meanwhile (SIGTERM): say so, or it waits the grace
            self._abandon(key)
            raise
        return cleared

    def finish_all(self) -> list[str]:
        """Finish every pending restart nobody holds: clear the tasks of its restart set that still run
        (or ran) the try it meant to end. Returns the tasks cleared."""
        cleared: list[str] = []
        for key in sorted(self.journal.load().pending):
            if not self.journal.update(functools.partial(self._claim, key=key)):
                continue
            log.warning("finishing the restart decided for %s: its clears did not all happen", key)
            done = self.finish(key)
            cleared.extend(done)
            if done:
                self.journal.record(
                    RestartReconciled(
                        time=self.clock.now(),
                        task=key.task,
                        cleared=tuple(done),
                        reason=f"finished the clears of the restart decided for {key}",
                    )
                )
        return cleared

    def _claim(self, state: RunState, key: TryKey) -> bool:
        restart = state.pending.get(key)
        now = self.clock.now()
        if restart is None or not restart.claimable(now):
            return False
        state.pending[key] = restart.claimed(now)
        return True

    def _abandon(self, key: TryKey) -> None:
        def abandoned(state: RunState) -> None:
            if key in state.pending:
                state.pending[key] = state.pending[key].abandon()

        try:
            self.journal.update(abandoned)
        except Exception as err:  # noqa: BLE001 - the store may be down too: the grace period covers it
            log.warning("could not mark the restart of %s as unfinished (%s)", key, err)
