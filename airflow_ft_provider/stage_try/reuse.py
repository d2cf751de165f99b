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

from collections.abc import Mapping
from functools import cached_property

from airflow_ft_provider import metrics
from airflow_ft_provider.execution.stage_identity import stage_identity
from airflow_ft_provider.model.reuse_scope import ReuseScope
from airflow_ft_provider.partitions import Manifest, PartitionNotFound
from airflow_ft_provider.partitions.provenance import lineage_key
from airflow_ft_provider.recovery.journal_events import OutputsReused
from airflow_ft_provider.stage_try.entries import Committed, PartitionEntry
from airflow_ft_provider.stage_try.scope import TryScope


class OutputReuse:
    """The reuse decision of one try of one task instance."""

    def __init__(self, scope: TryScope) -> None:
        self.scope = scope
        self.eligible = (
            scope.reuse_scope is not ReuseScope.OFF and bool(scope.input_refs) and scope.blocking_only
        )

    @cached_property
    def identity(self) -> str | None:
        return stage_identity(self.scope.stage)

    def lineage(self, read: Mapping[str, Manifest]) -> str | None:
        """The lineage of this try's outputs, from the manifests of the inputs it read (None: unknown,
        so the outputs can never be reused)."""
        if not self.eligible or self.identity is None:
            return None
        contents = {}
        for ref in self.scope.input_refs:
            manifest = read.get(ref.partition_id)
            if manifest is None or manifest.provenance.content is None:
                return None
            contents[ref.partition_id] = manifest.provenance.content
        return lineage_key(self.identity, contents)

    def try_reuse(self) -> Committed | None:
        """The committed entries when every output was reused; None when Spark must run: a stage that
        does not qualify, changed inputs or code, an output that is gone, or nothing to reuse (a first
        try, unless ``reuse="across-runs"`` finds an earlier run's)."""
        scope = self.scope
        across_runs = scope.reuse_scope is ReuseScope.ACROSS_RUNS
        if not self.eligible or (scope.try_number == 1 and not across_runs):
            return None
        try:
            key = self.lineage({ref.partition_id: scope.store.manifest(ref) for ref in scope.input_refs})
        except PartitionNotFound:
            return None
        if key is None:
            return None
        if scope.try_number > 1 and (committed := self._own_earlier_try(key)) is not None:
            return committed
        return self._earlier_run(key) if across_runs else None

    def _own_earlier_try(self, key: str) -> Committed | None:
        """The outputs this task committed in an earlier try of this run with lineage ``key``."""
        scope = self.scope
        try:
            previous = {ref.partition_id: scope.store.manifest(ref) for ref in scope.output_refs}
        except PartitionNotFound:
            return None
        if any(m.provenance.lineage != key for m in previous.values()):
            return None
        if scope.recovery.named_by_manual_restart(
            scope.task, since=min(m.created_at for m in previous.values())
        ):
            scope.log.info("%s: a manual restart named this region: running Spark", scope.task)
            return None
        producer = scope.producer()
        committed: Committed = {}
        for ref in scope.output_refs:
            manifest = scope.store.reuse_output(ref, producer, lineage=key)
            if manifest is None:  # a file went missing since: Spark rebuilds it
                return None
            earlier = previous[ref.partition_id].producer.try_number
            committed[ref.partition_id] = PartitionEntry.committed(
                manifest, manifest.row_count, reused_from_try=earlier
            )
        tries = " and ".join(str(t) for t in sorted({m.producer.try_number for m in previous.values()}))
        self._record(f"inputs identical to try {tries}'s: output of try {tries} reused, Spark not started")
        return committed

    def _earlier_run(self, key: str) -> Committed | None:
        """``reuse="across-runs"``: the outputs of the newest earlier run (still in the store) that
        computed them with lineage ``key``, copied into this run."""
        scope = self.scope
        if scope.recovery.named_by_manual_restart(scope.task, since=0.0):
            return None
        producer = scope.producer()
        sources = scope.store.earlier_run_outputs(list(scope.output_refs), producer, lineage=key)
        if sources is None:
            return None
        committed: Committed = {}
        for ref in scope.output_refs:
            manifest = scope.store.copy_output(ref, sources[ref.partition_id], producer)
            if manifest is None:  # that run was released meanwhile: Spark computes the outputs
                return None
            committed[ref.partition_id] = PartitionEntry.committed(
                manifest, manifest.row_count, reused_from_run=sources[ref.partition_id].run_id
            )
        runs = " and ".join(sorted({m.run_id for m in sources.values()}))
        self._record(f"inputs and code identical to run {runs}'s: its output copied, Spark not started")
        return committed

    def _record(self, explanation: str) -> None:
        """In the task log and the run's history (the failover page, ``airflow-ft history``), in words."""
        scope = self.scope
        scope.log.info("%s: %s", scope.task, explanation)
        metrics.reused(len(scope.output_refs), dag_id=scope.stage.dag_id, task_id=scope.task)
        scope.recovery.record_try(
            OutputsReused(task=scope.task, try_number=scope.try_number, reason=explanation)
        )
