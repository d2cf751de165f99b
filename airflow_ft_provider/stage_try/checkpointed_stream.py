"""The try of a checkpointed stage on the executors' data path (``spark/object_stream.py``): nothing of
it is on the Airflow worker's disk.

* Spark's checkpoint (offsets, commits, a stateful stage's RocksDB state) is where Spark writes it, under
  ``[ft_provider] spark_checkpoint_dir`` on the Spark side: the driver's disk by default, which a
  resumed try finds when the Spark driver is the same (a Spark Connect server, or local Spark on this
  worker); a path every Spark host sees (HDFS, NFS, s3a) for a stateful stage whose executors run on
  several hosts, or to survive the driver's loss.
* The micro-batches' outputs are in the store, under the task's ``checkpoints/`` prefix.

Both are named after the **generation**: a digest of the committed attempts of the stage's inputs and
of ``interval-volume`` (which fixes what each micro-batch reads). A retry against the same inputs is
the same generation and resumes where Spark's checkpoint says; a retry after failover rebuilt an input
is a new generation and starts afresh (Flink's rule, ``checkpoints/fencing.py``). The try that commits
the output deletes the task's micro-batch outputs. Each try's checkpoint statistics come from the
store's listing of them (``checkpoints/stream_stats.py``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from airflow_ft_provider import metrics
from airflow_ft_provider.checkpoints.config import CheckpointConfig
from airflow_ft_provider.checkpoints.fencing import Why
from airflow_ft_provider.checkpoints.store_copy import StoreCheckpoints
from airflow_ft_provider.checkpoints.stream_stats import (
    StoredBatch,
    StreamStats,
    committed_before,
    stored_batches,
)
from airflow_ft_provider.execution.workdir import TryWorkdir
from airflow_ft_provider.partitions.naming import encode_segment
from airflow_ft_provider.recovery.journal_events import CheckpointRestored
from airflow_ft_provider.spark.object_stream import per_batch
from airflow_ft_provider.spark.spec import CheckpointSpec
from airflow_ft_provider.stage_try.checkpoint_report import report_checkpoints
from airflow_ft_provider.stage_try.run_mode import RunFinished
from airflow_ft_provider.stage_try.scope import TryScope

SPARK_DIR_KEY = "spark_checkpoint_dir"  # [ft_provider]: Spark's checkpoints, a path on the Spark side
DEFAULT_SPARK_DIR = "/tmp/airflow-ft-spark-checkpoints"  # get_provider_info declares it


def spark_checkpoint_root() -> str:
    from airflow.sdk import conf

    return (conf.get("ft_provider", SPARK_DIR_KEY, fallback=None) or DEFAULT_SPARK_DIR).rstrip("/")


class StreamedCheckpointRun:
    """A checkpointed try whose micro-batches the executors read and write (``RunMode``)."""

    processed: Collection[str] = ()  # nothing is fetched to this worker

    def __init__(self, scope: TryScope, config: CheckpointConfig) -> None:
        self.scope = scope
        self.config = config
        self.copies = StoreCheckpoints(scope.store, scope.run, scope.task)
        self.generation = ""
        self.at_start: dict[int, StoredBatch] = {}  # micro-batches whose output the store holds
        self.restored_from: int | None = None  # the newest of them known to be committed
        self.input_sizes: list[int] = []  # the input objects', in the order the stream reads them
        self.stats: StreamStats | None = None

    @contextmanager
    def workdir(self) -> Iterator[Path]:
        self.generation = self._generation()
        stored = self.scope.store.list_objects(self._streams())
        others = [key for key in stored if not key.startswith(self._prefix())]
        self.scope.store.delete_keys(others)  # taken against other inputs: never resumed
        self.at_start = stored_batches(stored, self._prefix())
        self.restored_from = committed_before(self.at_start)
        self._record(changed=bool(others))
        with TryWorkdir(log=self.scope.log) as workdir:
            try:
                yield workdir
            except BaseException:
                self._record_statistics(succeeded=False)
                raise
        self._record_statistics(succeeded=True)  # committed: as counted when the micro-batches ended
        self.copies.release()  # the output is committed: the micro-batches' outputs are not needed

    def spec(self, *, fail_in_batch: int | None) -> CheckpointSpec:
        run = self.scope.run
        location = "/".join(
            (
                spark_checkpoint_root(),
                run.pipeline,
                encode_segment(run.run_id),
                self.scope.task,
                self.generation,
            )
        )
        return CheckpointSpec(
            location=location if "://" in location else f"file://{location}",
            max_bytes_per_trigger=self.config.interval_volume,
            fail_in_batch=fail_in_batch,
            changelog=self.config.incremental,
            interval_seconds=self.config.interval,
            stream=f"s3://{self.scope.store.layout.bucket}/{self._prefix()}",
        )

    def finish(self) -> RunFinished:
        self.stats = self._statistics(succeeded=True)  # before the commit releases the micro-batches
        return RunFinished(summary=self.summary())

    def summary(self) -> dict[str, object]:
        resumed = self.restored_from is not None
        return {
            "restored_from": self.restored_from,
            "why": (Why.RESUME if resumed else Why.NO_CHECKPOINT).value,
            "explanation": self._explanation(),
            "generation": self.generation,
            "restored_via": "spark" if resumed else None,
            "input_bytes": sum(self.input_sizes),
            "input_bytes_read": sum(self.input_sizes) - self._covered(self.restored_from),
            "checkpoints": self.stats.as_dict() if self.stats else {},
        }

    def _statistics(self, *, succeeded: bool) -> StreamStats:
        at_end = stored_batches(self.scope.store.list_objects(self._prefix()), self._prefix())
        return StreamStats.of_try(
            self.at_start, at_end, self.input_sizes, self._per_batch(), succeeded=succeeded
        )

    def _record_statistics(self, *, succeeded: bool) -> None:
        try:
            if not succeeded or self.stats is None:
                self.stats = self._statistics(succeeded=succeeded)
        except Exception as err:  # noqa: BLE001 - statistics never fail a try (nor hide its failure)
            self.scope.log.warning("%s: checkpoint statistics not recorded: %s", self.scope.task, err)
            return
        report_checkpoints(self.scope, self.stats, succeeded=succeeded)

    # -- helpers ------------------------------------------------------------------------------------
    def _streams(self) -> str:
        return f"{self.copies.prefix}streams/"

    def _prefix(self) -> str:
        return f"{self._streams()}{self.generation}/"

    def _generation(self) -> str:
        """The digest of what the micro-batches read: every input's committed attempt (a pipelined
        input's is new with every execution of its region: such a stage never resumes) and the volume."""
        scope = self.scope
        results = scope.description.graph.results
        inputs: dict[str, str] = {}
        for result, partition_ids in scope.consumed().items():
            for partition_id in partition_ids:
                if results[result].result_type.is_reconsumable:
                    manifest = scope.store.manifest(scope.run.parse(partition_id))
                    inputs[partition_id] = manifest.attempt_id
                    self.input_sizes += [entry.size for entry in manifest.files]
                else:
                    inputs[partition_id] = f"pipelined-try-{scope.try_number}"
        doc = json.dumps({"inputs": inputs, "volume": self.config.interval_volume}, sort_keys=True)
        return "g" + hashlib.sha256(doc.encode()).hexdigest()[:16]

    def _per_batch(self) -> int:
        """Input objects a micro-batch reads (as the Spark side computes it: ``object_stream``)."""
        return per_batch(self.input_sizes, self.config.interval_volume)

    def _covered(self, batch_id: int | None) -> int:
        """Input bytes micro-batches 0…``batch_id`` read."""
        return 0 if batch_id is None else sum(self.input_sizes[: (batch_id + 1) * self._per_batch()])

    def _explanation(self) -> str:
        task, number, restored = self.scope.task, self.scope.try_number, self.restored_from
        if restored is None:
            return (
                f"{task} try {number} starts fresh: no committed micro-batch of generation "
                f"{self.generation} is stored"
            )
        total = sum(self.input_sizes)
        share = 100 * self._covered(restored) / total if total else 100.0
        return (
            f"{task} try {number} resumed at checkpoint {restored}: {share:.0f} % of the input is not read "
            f"again (micro-batches 0–{restored} of generation {self.generation} are committed; Spark's "
            "checkpoint, on the Spark side, says where the query goes on)"
        )

    def _record(self, *, changed: bool) -> None:
        explanation = self._explanation()
        if changed and self.restored_from is None:
            explanation += " (the stored micro-batches were taken against other inputs: removed)"
        self.scope.log.info("%s", explanation)
        if self.restored_from is not None:
            metrics.restored("spark", dag_id=self.scope.run.pipeline, task_id=self.scope.task)
        self.scope.recovery.record_try(
            CheckpointRestored(
                task=self.scope.task,
                try_number=self.scope.try_number,
                reason=explanation,
                restored_from=self.restored_from,
                restored_via=None if self.restored_from is None else "spark",
            )
        )
