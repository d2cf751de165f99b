"""A new try commits what a killed earlier try of its task computed and did not commit.

Two records, both in Airflow's ``task_state_store``, let it:

- **finished work** (``execution/finished_work.py``): written the moment the application had written
  every output. The output is committed without starting Spark.
- **running work** (``execution/running_work.py``, Spark Connect): written just before the application
  runs. The server outlives the worker, so its write may still be going on: the new try waits until the
  earlier try's session has no running operation (``execution/connect_operations.py``), then commits
  every output whose write completed (a staged output: Spark's ``_SUCCESS`` marker, written by the
  server when the job commits; the executors' S3 attempt: the record Spark's driver writes when it
  commits, ``_ft_written.json``). One computation of the partition, not two.

Either is adopted only when:

- every output is blocking, and every input blocking and still the attempt the work read, with the
  stage's code unchanged (a pipelined input belongs to one execution of the region, which a restart
  replaces);
- the output is still where it was written: an ``s3://`` or ``s3a://`` attempt from any worker; a
  staging directory on this worker only, whose try is dead (its lock is free) and which no sweeper
  removed meanwhile (``execution/workdir.py``);
- the commit, fenced by this try's number like any, succeeds. Anything else: the try runs Spark (and
  interrupts what the earlier try left running first, ``execution/connect.py``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from pathlib import Path

from airflow_ft_provider import metrics
from airflow_ft_provider.execution.connect import server_identity
from airflow_ft_provider.execution.connect_logs import quiet_abandoned_releases
from airflow_ft_provider.execution.connect_operations import wait_for_operations
from airflow_ft_provider.execution.connect_sessions import TrySession
from airflow_ft_provider.execution.contracts import DataPlacement, WrittenOutput
from airflow_ft_provider.execution.finished_work import (
    FINISHED_KEY,
    FinishedOutput,
    FinishedWork,
    earlier_finished_work,
)
from airflow_ft_provider.execution.placement import DirectS3a, ExecutorS3, StagedFiles
from airflow_ft_provider.execution.running_work import RUNNING_KEY, RunningWork, earlier_running_work
from airflow_ft_provider.execution.task_state import TaskStateStore
from airflow_ft_provider.execution.workdir import adopt_abandoned, keep_for_next_try
from airflow_ft_provider.hooks.partition_store import config_flag
from airflow_ft_provider.partitions import Manifest, PartitionNotFound
from airflow_ft_provider.partitions.provenance import Provenance
from airflow_ft_provider.recovery.journal_events import WorkAdopted
from airflow_ft_provider.spark.content import rows_in_footers
from airflow_ft_provider.spark.spec import StoreAccess
from airflow_ft_provider.stage_try.entries import Committed, PartitionEntry
from airflow_ft_provider.stage_try.reuse import OutputReuse
from airflow_ft_provider.stage_try.scope import TryScope
from airflow_ft_provider.task_log import TaskLog

SUCCESS_MARKER = "_SUCCESS"  # Spark's (Hadoop's) file of a committed write job
WAIT_FOR_RUNNING_WORK = "wait_for_running_work"  # [ft_provider] key (get_provider_info.py)


def wait_for_running_work() -> bool:
    """``[ft_provider] wait_for_running_work`` (default True): whether a try waits for an earlier try's
    Spark Connect work still running; a non-boolean value is a ValueError naming the key, read at every
    try's start so that it fails before it matters."""
    return config_flag(WAIT_FOR_RUNNING_WORK, default=True)


class FinishedWorkAdoption:
    """Records this try's finished work, and adopts an earlier try's (see the module's docstring)."""

    def __init__(
        self,
        scope: TryScope,
        reuse: OutputReuse,
        *,
        connect_url: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.scope = scope
        self.reuse = reuse  # the lineage of the task's outputs
        self.compression = {o.result: o.compression for o in scope.stage.outputs}
        self.state: TaskStateStore | None = scope.task_state
        self.log: TaskLog = scope.log
        self.connect_url = connect_url  # this try's Spark Connect connection (None: not Connect)
        self.eligible = scope.checkpoint_config is None and scope.blocking_only

    def record_started(
        self,
        session: TrySession | None,
        locations: Mapping[str, tuple[str, str | None]],
        read: Mapping[str, Manifest],
        lineage: str | None,
        workdir: Path | None,
    ) -> None:
        """Say, before the application runs, which Spark Connect session writes which outputs: staged
        ones, or the executors' S3 attempts (s3a writes leave no record of their end: not waited for)."""
        outputs = {name: location for name, (location, _) in locations.items()}
        attempts = {name: attempt for name, (_, attempt) in locations.items() if attempt is not None}
        if not self.eligible or self.state is None or session is None or workdir is None or not outputs:
            return
        staged = all(location.startswith("file://") for location in outputs.values())
        in_s3 = all(loc.startswith("s3://") for loc in outputs.values()) and set(attempts) == set(outputs)
        if not (staged or in_s3):
            return
        if staged:
            keep_for_next_try(workdir)
        inputs = {pid: manifest.attempt_id for pid, manifest in read.items()}
        # (staged outputs have no attempt id: their record names none)
        work = RunningWork(session, socket.gethostname(), str(workdir), inputs, lineage, outputs, attempts)
        self._save(RUNNING_KEY, work.to_json(), "running work")

    def record(
        self,
        locations: Mapping[str, tuple[str, str | None]],
        written: Mapping[str, WrittenOutput],
        read: Mapping[str, Manifest],
        lineage: str | None,
        workdir: Path | None,
    ) -> None:
        """Say where this try's finished output is (``locations``: result -> location, attempt)."""
        if not self.eligible or self.state is None:
            return
        if workdir is not None and any(loc.startswith("file://") for loc, _ in locations.values()):
            keep_for_next_try(workdir)  # kept by other tries' sweeps, should this try be killed now
        work = FinishedWork(
            self.scope.try_number,
            socket.gethostname(),
            str(workdir) if workdir is not None else None,
            {pid: manifest.attempt_id for pid, manifest in read.items()},
            lineage,
            {
                name: FinishedOutput(location, attempt, written[name].rows, written[name].content)
                for name, (location, attempt) in locations.items()
            },
        )
        self._save(FINISHED_KEY, work.to_json(), "finished work")

    def _save(self, key: str, record: dict[str, object], what: str) -> None:
        assert self.state is not None
        try:
            self.state.set(key, record)
        except Exception as err:  # noqa: BLE001 - the work goes on; only a killed try's output is lost
            self.log.info("could not record this try's %s (%s)", what, err)

    def try_adopt(self) -> Committed | None:
        """The committed entries when an earlier try's output was committed for this try."""
        if self.scope.try_number == 1:  # no earlier try left work behind: no records to read
            return None
        return self._adopt_finished() or self._adopt_running()

    def _adopt_finished(self) -> Committed | None:
        work, passed_over = earlier_finished_work(self.state, self.scope.try_number)
        if passed_over:
            self.log.info("%s", passed_over)
        if work is None or not self.eligible or not self._unchanged(work.inputs, work.lineage):
            return None
        if set(work.outputs) != {ref.result for ref in self.scope.output_refs}:
            return None
        staged = any(o.location.startswith("file://") for o in work.outputs.values())
        if staged and (work.host != socket.gethostname() or work.workdir is None):
            self.log.info("try %d finished its work on %s: not on this worker", work.try_number, work.host)
            return None
        claim = adopt_abandoned(work.workdir) if staged and work.workdir else nullcontext(True)
        with claim as claimed:
            if not claimed:
                self.log.info(
                    "try %d's output in %s is gone, or its try still runs", work.try_number, work.workdir
                )
                return None
            committed = self._commit_or_none(work, staged)
        if committed is not None:
            self._adopted(
                "finished",
                f"try {work.try_number} finished its Spark work and was killed before its commit: "
                "output committed, Spark not started",
            )
        return committed

    def _adopt_running(self) -> Committed | None:
        work, passed_over = earlier_running_work(self.state, self.scope.try_number)
        if passed_over:
            self.log.info("%s", passed_over)
        if (
            work is None
            or not self.eligible
            or set(work.outputs) != {r.result for r in self.scope.output_refs}
        ):
            return None
        earlier, url = work.try_number, self.connect_url()
        if url is None:
            self.log.info(
                "try %d's Spark work may still run in Spark Connect: this try does not wait for it (a "
                "spark-submit connection, or [ft_provider] wait_for_running_work is off)",
                earlier,
            )
            return None
        elsewhere = work.staged and work.host != socket.gethostname()  # S3 attempts: from any worker
        if server_identity(url) != work.session.server or elsewhere:
            self.log.info(
                "try %d's Spark work runs on %s, writing on %s: not this try's server and worker",
                earlier,
                work.session.server,
                work.host,
            )
            return None
        if not self._unchanged(work.inputs, work.lineage):
            return None  # the backend interrupts it before this try computes
        with adopt_abandoned(work.workdir) if work.staged else nullcontext(True) as claimed:
            if not claimed:
                self.log.info("try %d's output in %s is gone, or its try still runs", earlier, work.workdir)
                return None
            quiet_abandoned_releases()
            waited = wait_for_operations(url, work.session, log=self.log)
            rows = self._completed_rows(work)
            incomplete = sorted(name for name, count in rows.items() if count is None)
            if incomplete:
                self.log.info(
                    "try %d's Spark work ended without completing %s%s: running Spark",
                    earlier,
                    ", ".join(incomplete),
                    f" ({waited.why})" if waited.why else "",
                )
                return None
            outputs = {
                n: FinishedOutput(loc, work.attempts.get(n), rows[n] or 0, None)
                for n, loc in work.outputs.items()
            }
            finished = FinishedWork(earlier, work.host, work.workdir, work.inputs, work.lineage, outputs)
            committed = self._commit_or_none(finished, staged=work.staged)
        if committed is not None:
            self._adopted(
                "running",
                f"try {earlier}'s Spark work was still running when its worker died: waited "
                f"{waited.seconds:.1f} s for it, output committed, no second computation started"
                if waited.saw_running
                else f"try {earlier}'s Spark work completed after its worker died: output committed, "
                "Spark not started",
            )
        return committed

    def _completed_rows(self, work: RunningWork) -> dict[str, int | None]:
        """Each output's rows if its write job committed, else None."""
        if work.staged:
            return {name: _staged_rows(location) for name, location in work.outputs.items()}
        refs = {ref.result: ref for ref in self.scope.output_refs}
        try:
            return {
                name: self.scope.store.recorded_rows(refs[name], work.attempts[name]) for name in work.outputs
            }
        except Exception as err:  # noqa: BLE001 - a record we cannot read: compute again
            self.log.info("could not read try %d's record of its written objects (%s)", work.try_number, err)
            return dict.fromkeys(work.outputs)

    def _commit_or_none(self, work: FinishedWork, staged: bool) -> Committed | None:
        try:
            return self._commit(work, staged)
        except Exception as err:  # noqa: BLE001 - running Spark again is always right
            self.log.info("could not commit try %d's output (%s): running Spark", work.try_number, err)
            return None

    def _unchanged(self, inputs: Mapping[str, str], lineage: str | None) -> bool:
        """The inputs are still the attempts the earlier try read, and the stage's code (in its
        lineage, when recorded) is the same."""
        if set(inputs) != {ref.partition_id for ref in self.scope.input_refs}:
            return False
        try:
            read = {ref.partition_id: self.scope.store.manifest(ref) for ref in self.scope.input_refs}
        except PartitionNotFound:
            return False
        if any(manifest.attempt_id != inputs[pid] for pid, manifest in read.items()):
            self.log.info("the inputs changed since the earlier try read them: its work is not adopted")
            return False
        if lineage is not None and self.reuse.lineage(read) != lineage:
            self.log.info("the stage's code changed since the earlier try: its work is not adopted")
            return False
        return True

    def _commit(self, work: FinishedWork, staged: bool) -> Committed:
        store, producer = self.scope.store, self.scope.producer()
        placement: DataPlacement = (
            StagedFiles(store, Path(work.workdir or "."))
            if staged
            else DirectS3a(store)
            if any(o.location.startswith("s3a://") for o in work.outputs.values())
            else ExecutorS3(store, StoreAccess(), None)  # its commit reads the executors' record only
        )
        committed: Committed = {}
        for ref in self.scope.output_refs:
            out = work.outputs[ref.result]
            manifest = placement.commit(
                ref,
                out.location,
                out.attempt,
                pipelined=False,
                producer=producer,
                compression=self.compression[ref.result],
                rows=out.rows,
                provenance=Provenance(out.content, work.lineage),
            )
            committed[ref.partition_id] = PartitionEntry.committed(
                manifest, out.rows, adopted_from_try=work.try_number
            )
        return committed

    def forget(self) -> None:
        """This try committed its own output: no later try may take the records for work left over."""
        if self.eligible and self.state is not None:
            for key in (FINISHED_KEY, RUNNING_KEY):
                try:
                    self.state.delete(key)
                except Exception as err:  # noqa: BLE001 - a later try finds the output gone: runs Spark
                    self.log.info("could not clear task_state_store[%r] (%s)", key, err)

    def _adopted(self, kind: str, said: str) -> None:
        scope = self.scope
        self.forget()
        self.log.info("%s: %s", scope.task, said)
        metrics.adopted(len(scope.output_refs), dag_id=scope.stage.dag_id, task_id=scope.task, kind=kind)
        scope.recovery.record_try(WorkAdopted(task=scope.task, try_number=scope.try_number, reason=said))


def _staged_rows(location: str) -> int | None:
    """The rows of a staged output whose write job committed (None: it did not, or unreadable)."""
    if not os.path.exists(os.path.join(location.removeprefix("file://"), SUCCESS_MARKER)):
        return None
    return rows_in_footers(location)
