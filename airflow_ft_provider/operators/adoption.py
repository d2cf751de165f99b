"""A new try commits what a killed earlier try of its task finished and did not commit.

The earlier try recorded its finished work (``execution/finished_work.py``) the moment its application
had written every output. A new try adopts it, without starting Spark, when:

- every output is blocking, and every input blocking and still the attempt the work read (a pipelined
  input belongs to one execution of the region, which a restart replaces);
- the output is still where it was written: an ``s3a://`` attempt (direct s3a) from any worker; a
  staging directory on this worker only, whose try is dead (its lock is free) and which no sweeper
  removed meanwhile (``execution/workdir.py``);
- the commit, fenced by this try's number like any, succeeds. Anything else: the try runs Spark.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from airflow_ft_provider.execution.contracts import DataPlacement, TaskLog, WrittenOutput
from airflow_ft_provider.execution.finished_work import (
    FINISHED_KEY,
    FinishedOutput,
    FinishedWork,
    earlier_finished_work,
)
from airflow_ft_provider.execution.placement import DirectS3a, StagedFiles
from airflow_ft_provider.execution.task_state import TaskStateStore
from airflow_ft_provider.execution.workdir import adopt_abandoned, mark_finished
from airflow_ft_provider.model.exchanges import Output
from airflow_ft_provider.operators.output_reuse import OutputReuse, committed_entry
from airflow_ft_provider.partitions import Manifest, PartitionNotFound
from airflow_ft_provider.partitions.provenance import Provenance
from airflow_ft_provider.recovery.journal import RecoveryJournal


class FinishedWorkAdoption:
    """Records this try's finished work, and adopts an earlier try's (see the module's docstring)."""

    def __init__(
        self,
        reuse: OutputReuse,
        outputs: tuple[Output, ...],
        *,
        checkpointed: bool,
        state: TaskStateStore | None,
        log: TaskLog,
    ) -> None:
        self.reuse = reuse  # the task's inputs, outputs, store and producer
        self.compression = {o.result: o.compression for o in outputs}
        self.state = state
        self.log = log
        self.eligible = not checkpointed and reuse.blocking_only

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
            mark_finished(workdir)  # kept by other tries' sweeps, should this try be killed now
        work = FinishedWork(
            self.reuse.try_number,
            socket.gethostname(),
            str(workdir) if workdir is not None else None,
            {pid: manifest.attempt_id for pid, manifest in read.items()},
            lineage,
            {
                name: FinishedOutput(location, attempt, written[name].rows, written[name].content)
                for name, (location, attempt) in locations.items()
            },
        )
        try:
            self.state.set(FINISHED_KEY, work.to_json())
        except Exception as err:  # noqa: BLE001 - the commit goes on; only a killed try's output is lost
            self.log.info("could not record this try's finished work (%s)", err)

    def try_adopt(self) -> dict[str, Any] | None:
        """The committed entries when an earlier try's finished output was committed for this try."""
        work, passed_over = earlier_finished_work(self.state, self.reuse.try_number)
        if passed_over:
            self.log.info("%s", passed_over)
        if work is None or not self.eligible or not self._same_inputs(work):
            return None
        if set(work.outputs) != {ref.result for ref in self.reuse.outputs}:
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
            try:
                committed = self._commit(work, staged)
            except Exception as err:  # noqa: BLE001 - running Spark again is always right
                self.log.info(
                    "could not commit try %d's finished work (%s): running Spark", work.try_number, err
                )
                return None
        self.forget()
        self._record(work.try_number)
        return committed

    def _same_inputs(self, work: FinishedWork) -> bool:
        if set(work.inputs) != {ref.partition_id for ref in self.reuse.inputs}:
            return False
        try:
            return all(
                self.reuse.store.manifest(ref).attempt_id == work.inputs[ref.partition_id]
                for ref in self.reuse.inputs
            )
        except PartitionNotFound:
            return False

    def _commit(self, work: FinishedWork, staged: bool) -> dict[str, Any]:
        store, producer = self.reuse.store, self.reuse.producer()
        placement: DataPlacement = (
            StagedFiles(store, Path(work.workdir or ".")) if staged else DirectS3a(store)
        )
        committed: dict[str, Any] = {}
        for ref in self.reuse.outputs:
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
            committed[ref.partition_id] = committed_entry(
                manifest, out.rows, adopted_from_try=work.try_number
            )
        return committed

    def forget(self) -> None:
        """This try committed its own output: no later try may take the record for work left over."""
        if self.eligible and self.state is not None:
            try:
                self.state.delete(FINISHED_KEY)
            except Exception as err:  # noqa: BLE001 - a later try finds the output gone and runs Spark
                self.log.info("could not clear the finished-work record (%s)", err)

    def _record(self, earlier: int) -> None:
        said = (
            f"try {earlier} finished its Spark work and was killed before its commit: "
            "output committed, Spark not started"
        )
        self.log.info("%s: %s", self.reuse.task, said)
        RecoveryJournal(self.reuse.store, self.reuse.run).record(
            {
                "time": time.time(),
                "kind": "adopted",
                "task": str(self.reuse.task),
                "try_number": self.reuse.try_number,
                "reason": said,
            }
        )
