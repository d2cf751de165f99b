"""Whether a try may reuse outputs computed already from the same inputs and code instead of running Spark.

Flink restarts the consumers of a restarted region; so does this provider (``recovery/``). When the
restarted producer wrote the same rows again, a consumer's re-run would compute what it committed
already: the try compares the lineage of its outputs (``partitions/provenance.py``: its stage's
identity and its inputs' row checksums) with the lineage it would have now, and when they are equal
publishes the earlier output for itself (``PartitionReuse.reuse_output``) without starting Spark.

By default within a run: the earlier output is a valid result of this stage for identical inputs, so
the run's output stays exactly once. With ``reuse="across-runs"`` (``model/reuse_scope.py``) any try,
the first included, also looks for an earlier run that the store keeps and copies its outputs
(``PartitionReuse.copy_output``). A region named by a manual restart is computed again (what the user
asked for); the consumer regions the restart reschedules may reuse. A stage qualifies when all its
inputs and outputs are blocking, it has at least one input (a stage without inputs reads data the
lineage cannot see), it is not checkpointed (it resumes instead) nor set ``reuse="off"``, and its code
is readable here (``execution/stage_identity.py``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import cached_property
from typing import Any

from airflow_ft_provider import metrics
from airflow_ft_provider.execution.contracts import StageSettings, TaskLog
from airflow_ft_provider.execution.stage_identity import stage_identity
from airflow_ft_provider.failover.indexed_name import IndexedName, indexed
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.model.exchanges import Output
from airflow_ft_provider.model.reuse_scope import ReuseScope
from airflow_ft_provider.partitions import Manifest, PartitionNotFound, Producer, RunRef, S3PartitionStore
from airflow_ft_provider.partitions.provenance import lineage_key
from airflow_ft_provider.recovery.journal import RecoveryJournal


def committed_entry(
    manifest: Manifest, rows: int | None, *, execution: str | None = None, **extra: Any
) -> dict[str, Any]:
    """What a try reports (its XCom) of a partition it committed, however it came by the data."""
    return {
        "type": manifest.kind,
        "rows": rows,
        "files": len(manifest.files),
        "bytes": manifest.total_size,
        "attempt": manifest.attempt_id,
        "execution": execution,
        **extra,
    }


class OutputReuse:
    """The reuse decision of one try of one task instance (``StageAttempt``)."""

    def __init__(
        self,
        stage: StageSettings,
        outputs: tuple[Output, ...],
        *,
        description: PipelineDescription,
        store: S3PartitionStore,
        run: RunRef,
        map_index: int | None,
        try_number: int,
        scope: ReuseScope,
        log: TaskLog,
    ) -> None:
        self.stage = stage
        self.description = description
        self.store = store
        self.run = run
        self.map_index = map_index
        self.try_number = try_number
        self.log = log
        self.task = description.core_task_id(stage.task_id, map_index)
        graph = description.graph
        self.inputs = [
            run.parse(pid)
            for pids in description.consumed_partitions(stage.task_id, map_index).values()
            for pid in pids
        ]
        parallelism = graph.stages[stage.task_id].parallelism
        self.outputs = [run.parse(indexed(o.result, map_index, parallelism)) for o in outputs]
        # Blocking outputs (a stage without any runs for its effects: always) read from blocking inputs
        self.blocking_only = (
            bool(outputs)
            and all(graph.results[ref.result].result_type.is_reconsumable for ref in self.inputs)
            and all(o.result_type.is_reconsumable for o in outputs)
        )
        self.scope = scope
        self.eligible = scope is not ReuseScope.OFF and bool(self.inputs) and self.blocking_only

    @cached_property
    def identity(self) -> str | None:
        return stage_identity(self.stage)

    def lineage(self, read: Mapping[str, Manifest]) -> str | None:
        """The lineage of this try's outputs, from the manifests of the inputs it read (None: unknown,
        so the outputs can never be reused)."""
        if not self.eligible or self.identity is None:
            return None
        contents = {}
        for ref in self.inputs:
            manifest = read.get(ref.partition_id)
            if manifest is None or manifest.provenance.content is None:
                return None
            contents[ref.partition_id] = manifest.provenance.content
        return lineage_key(self.identity, contents)

    def producer(self) -> Producer:
        return Producer(
            self.stage.task_id,
            IndexedName.from_airflow(self.stage.task_id, self.map_index).index,
            self.try_number,
        )

    def try_reuse(self) -> dict[str, Any] | None:
        """The committed entries (as ``StageAttempt.run`` returns them) when every output was reused;
        None when Spark must run: a stage that does not qualify, changed inputs or code, an output that is
        gone, or nothing to reuse (a first try, unless ``reuse="across-runs"`` finds an earlier run's)."""
        across_runs = self.scope is ReuseScope.ACROSS_RUNS
        if not self.eligible or (self.try_number == 1 and not across_runs):
            return None
        try:
            key = self.lineage({ref.partition_id: self.store.manifest(ref) for ref in self.inputs})
        except PartitionNotFound:
            return None
        if key is None:
            return None
        if self.try_number > 1 and (committed := self._own_earlier_try(key)) is not None:
            return committed
        return self._earlier_run(key) if across_runs else None

    def _own_earlier_try(self, key: str) -> dict[str, Any] | None:
        """The outputs this task committed in an earlier try of this run with lineage ``key``."""
        try:
            previous = {ref.partition_id: self.store.manifest(ref) for ref in self.outputs}
        except PartitionNotFound:
            return None
        if any(m.provenance.lineage != key for m in previous.values()):
            return None
        if self._named_by_a_manual_restart(since=min(m.created_at for m in previous.values())):
            self.log.info("%s: a manual restart named this region: running Spark", self.task)
            return None
        producer = self.producer()
        committed: dict[str, Any] = {}
        for ref in self.outputs:
            manifest = self.store.reuse_output(ref, producer, lineage=key)
            if manifest is None:  # a file went missing since: Spark rebuilds it
                return None
            earlier = previous[ref.partition_id].producer.try_number
            committed[ref.partition_id] = committed_entry(
                manifest, manifest.row_count, reused_from_try=earlier
            )
        tries = " and ".join(str(t) for t in sorted({m.producer.try_number for m in previous.values()}))
        self._record(f"inputs identical to try {tries}'s: output of try {tries} reused, Spark not started")
        return committed

    def _earlier_run(self, key: str) -> dict[str, Any] | None:
        """``reuse="across-runs"``: the outputs of the newest earlier run (still in the store) that
        computed them with lineage ``key``, copied into this run."""
        if self._named_by_a_manual_restart(since=0.0):
            return None
        producer = self.producer()
        sources = self.store.earlier_run_outputs(self.outputs, producer, lineage=key)
        if sources is None:
            return None
        committed: dict[str, Any] = {}
        for ref in self.outputs:
            manifest = self.store.copy_output(ref, sources[ref.partition_id], producer)
            if manifest is None:  # that run was released meanwhile: Spark computes the outputs
                return None
            committed[ref.partition_id] = committed_entry(
                manifest, manifest.row_count, reused_from_run=sources[ref.partition_id].run_id
            )
        runs = " and ".join(sorted({m.run_id for m in sources.values()}))
        self._record(f"inputs and code identical to run {runs}'s: its output copied, Spark not started")
        return committed

    def _named_by_a_manual_restart(self, *, since: float) -> bool:
        """Whether a manual restart after ``since`` named this task's region (the user asked for it to be
        computed again; the consumer regions it rescheduled may still reuse their outputs)."""
        for event in RecoveryJournal(self.store, self.run).events():
            when = event.get("time")
            if event.get("kind") != "manual" or not isinstance(when, (int, float)) or when <= since:
                continue
            named = str(event.get("task"))
            for region in event.get("regions", []):
                if str(self.task) in region and any(t == named or t.startswith(f"{named}[") for t in region):
                    return True
        return False

    def _record(self, explanation: str) -> None:
        """In the task log and the run's history (the failover page, ``airflow-ft history``), in words."""
        self.log.info("%s: %s", self.task, explanation)
        metrics.reused(len(self.outputs), dag_id=self.stage.dag_id, task_id=str(self.task))
        RecoveryJournal(self.store, self.run).record(
            {
                "time": time.time(),
                "kind": "reused",
                "task": str(self.task),
                "try_number": self.try_number,
                "reason": explanation,
            }
        )
