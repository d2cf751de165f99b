"""A run's recovery state and decision history, stored beside its partitions in S3.

    <pipeline>/<run>/_failover/state.json                 RunState (journal_schema.py), by compare-and-swap
    <pipeline>/<run>/_failover/events/<time>-<task>.json  one object per decision or manual restart
    <pipeline>/<run>/_failover/pipeline.json              the PipelineDescription the run executes

Every stage try also pushes where its store is (``{"url": ..., "aws_conn_id": ...}``) as XCom
``ft_store``: that is how the UI plugin, which never imports DAG files, finds the journal of a run whose
pipeline has its own store. No credential is in it, only the connection's name.

S3 survives the loss of any worker, and the conditional writes of the partition store make concurrent
updates (two regions failing at once) safe: the loser re-reads and decides again.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from airflow_ft_provider.failover.clock import SystemClock
from airflow_ft_provider.model.description import MAX_DESCRIPTION_BYTES, PipelineDescription
from airflow_ft_provider.partitions import ConditionalJsonStore, RunRef, S3PartitionStore
from airflow_ft_provider.recovery import journal_schema
from airflow_ft_provider.recovery.journal_events import JournalEvent
from airflow_ft_provider.recovery.pending import RunState

log = logging.getLogger(__name__)
T = TypeVar("T")
STORE_XCOM_KEY = "ft_store"


class DamagedJournal(ValueError):
    """The run's stored recovery state cannot be trusted: nothing that reads or writes it may go on.

    The failover page still shows the run (with the reason), a manual restart is refused (it would write
    over the evidence and the restart budgets), and the message names the object and the two fixes."""


class RecoveryJournal:
    def __init__(self, store: S3PartitionStore, run: RunRef) -> None:
        self.store = store
        self.run = run
        prefix = store.layout.run_prefix(run) + "_failover/"
        self.state_key = prefix + "state.json"
        self.events_prefix = prefix + "events/"
        self.description_key = prefix + "pipeline.json"

    @property
    def _descriptions(self) -> ConditionalJsonStore:
        return self.store.conditional_objects(max_bytes=MAX_DESCRIPTION_BYTES)

    def store_pointer(self, aws_conn_id: str) -> dict[str, str]:
        return {"url": self.store.layout.url, "aws_conn_id": aws_conn_id}

    def store_description(
        self, description: PipelineDescription, *, replace_if: Callable[[], bool] = lambda: False
    ) -> PipelineDescription:
        """Store the pipeline this run executes, once: created if absent (conditional write), replaced
        only if it differs and ``replace_if()`` says so (or it is damaged). Returns the stored one."""
        data = description.to_json()
        outcome: list[PipelineDescription] = []

        def change(current: bytes | None) -> bytes | None:
            outcome[:] = [description]
            if current == data:
                return None
            if current is None:
                return data
            try:
                stored = PipelineDescription.from_json(current)
            except ValueError:
                return data  # damaged: nothing can follow it
            outcome[:] = [stored]
            if stored.declares_as(description):
                return None  # the same pipeline, stored before (with the counts the run recorded)
            if replace_if():  # the counts Airflow expanded this run's stages to stand
                outcome[:] = [description.with_map_counts_of(stored)]
                return outcome[0].to_json()
            return None

        self._descriptions.update_raw(self.description_key, change, oversized="truncate")
        return outcome[0]

    def settle_description(self, parsed: PipelineDescription, *, now: float) -> PipelineDescription:
        """Store ``parsed`` (what a stage try parsed) as the run's pipeline, unless the run has one a
        pending restart depends on; return the description the run's recovery follows from now on.

        A run's recovery follows the pipeline stored with it, not whatever the DAG file says now: the
        first try stores it (a conditional create); a later try that parsed a different one (the DAG
        file was edited) replaces it only while no restart is pending, and says so in its log."""
        kept = self.store_description(parsed, replace_if=lambda: not self.load().restart_pending(now))
        if kept is not parsed and not kept.declares_as(parsed):
            log.warning(
                "DAG %s changed since run %s stored its pipeline, and a restart of that run is pending: "
                "recovery goes on with the stored pipeline until the restart is done (clear the run to "
                "start over with the new one)",
                parsed.dag_id,
                self.run.run_id,
            )
        return kept

    def record_map_count(self, stage: str, count: int) -> tuple[PipelineDescription, int | None]:
        """Record that ``stage`` (mapped over another task's output) runs with ``count`` map indexes in
        this run (``model/map_counts.py``), in the stored description, after it was settled; return it
        and the count recorded before (None: none; another: the output it expands over changed, and
        Airflow, which expanded the stage, is followed)."""
        outcome: list[tuple[PipelineDescription, int | None]] = []

        def change(current: bytes | None) -> bytes | None:
            if current is None:
                raise ValueError(f"run {self.run.run_id!r} has no stored pipeline to record a count in")
            stored = PipelineDescription.from_json(current)
            before = stored.map_counts.get(stage)
            outcome[:] = [(stored, before)]
            if before == count:
                return None
            outcome[:] = [(stored.with_map_count(stage, count), before)]
            return outcome[0][0].to_json()

        self._descriptions.update_raw(self.description_key, change, oversized="truncate")
        return outcome[0]

    def description(self) -> PipelineDescription | None:
        """The stored pipeline of this run; None before its first stage try."""
        raw = self._descriptions.get_bytes(self.description_key)
        return None if raw is None else PipelineDescription.from_json(raw.value)

    def load(self) -> RunState:
        """The stored state (empty before the first failure); :class:`DamagedJournal` if it is invalid."""
        current = self.store.json_objects.get_bytes(self.state_key)
        return self._parsed(None if current is None else current.value)

    def load_checked(self, description: PipelineDescription) -> RunState:
        """The stored state, with every restart budget in it restorable by the run's restart strategy:
        what the next failover decision will read. :class:`DamagedJournal` otherwise."""
        state = self.load()
        self.check_budgets(state, description)
        return state

    def check_budgets(self, state: RunState, description: PipelineDescription) -> None:
        """:class:`DamagedJournal` unless the run's restart strategy can restore every budget in ``state``."""
        for scope, saved in sorted(state.strategies.items()):
            try:
                description.restart_strategy(clock=SystemClock()).restore_state(saved)
            except ValueError as err:
                raise self._damaged(f"restart budget {scope!r}: {err}") from None

    def _parsed(self, raw: bytes | None) -> RunState:
        try:
            return journal_schema.decode(raw)
        except ValueError as err:
            raise self._damaged(str(err)) from None

    def _damaged(self, detail: str) -> DamagedJournal:
        return DamagedJournal(
            f"the run's recovery state s3://{self.store.bucket}/{self.state_key} is damaged ({detail}); "
            "failover decisions and manual restarts of this run read it, so they stop until it is "
            "repaired, or deleted to count the run's restarts afresh"
        )

    def update(self, change: Callable[[RunState], T]) -> T:
        """Apply ``change`` to the stored state atomically; it may run again after a lost race."""
        outcome: list[T] = []

        def apply(raw: bytes | None) -> bytes:
            state = self._parsed(raw)
            outcome[:] = [change(state)]
            return journal_schema.encode(state)

        self.store.json_objects.update_raw(self.state_key, apply)
        return outcome[0]

    def found_lost(self) -> frozenset[str]:
        """Partitions a failure's decision in this run found lost (a retry's commits rebuild them), for
        metrics: empty when the state cannot be read (a metric's lookup never fails a commit)."""
        try:
            return frozenset(p for d in self.load().decisions.values() for p in d.unavailable)
        except Exception:  # noqa: BLE001
            return frozenset()

    def record(self, event: JournalEvent) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(event.time))
        task = (event.task or "run").replace("[", "-").replace("]", "")
        key = f"{self.events_prefix}{stamp}-{task}-{uuid.uuid4().hex[:8]}.json"
        self.store.write_object(key, journal_schema.encode_event(event))

    def events(self) -> list[JournalEvent]:
        """Every recorded event, oldest first. One that does not parse or has fields of the wrong type
        is an ``InvalidEvent`` at its object's time, so a damaged event neither hides the others nor
        breaks the history page or ``airflow-ft history``."""
        events = []
        for key, info in self.store.list_objects(self.events_prefix).items():
            raw = self.store.json_objects.get_bytes(key, oversized="truncate")
            if raw is not None:
                events.append(
                    journal_schema.decode_event(raw.value, key, info.last_modified, self.store.bucket)
                )
        return sorted(events, key=lambda e: e.time)
