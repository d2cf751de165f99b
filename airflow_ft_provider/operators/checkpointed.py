"""The try of a checkpointed stage: it works in the stage's task-local checkpoint directory, which it
resumes from only if the inputs are the committed attempts the checkpoint was taken against.

A try that fails leaves the directory for the next try on this worker; the try that commits the
stage's output releases it. The decision (resume or fresh, and why) goes to the task log, to the
run's history (journal event ``checkpoint``) and to the try's ``ft_partitions`` XCom.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from airflow_ft_provider.checkpoints.config import CheckpointConfig
from airflow_ft_provider.checkpoints.fencing import RestoreDecision, restore_decision
from airflow_ft_provider.checkpoints.local import DEFAULT_ROOT, LocalCheckpoint, sweep_stale
from airflow_ft_provider.execution.contracts import TaskLog
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.spark.spec import CheckpointSpec

ROOT_KEY = "checkpoint_local_dir"  # [ft_provider]: where task-local checkpoints live (default: tmp)


def local_root() -> Path:
    from airflow.sdk import conf

    return Path(conf.get("ft_provider", ROOT_KEY, fallback=None) or DEFAULT_ROOT)


class CheckpointedTry:
    def __init__(
        self,
        config: CheckpointConfig,
        *,
        description: PipelineDescription,
        store: S3PartitionStore,
        run: RunRef,
        stage: str,
        map_index: int | None,
        try_number: int,
        log: TaskLog,
    ) -> None:
        self.config = config
        self.description = description
        self.store = store
        self.run = run
        self.stage = stage
        self.map_index = map_index
        self.task = description.core_task_id(stage, map_index)
        self.try_number = try_number
        self.log = log
        self.local = LocalCheckpoint(local_root(), run, self.task)
        self.decision: RestoreDecision | None = None

    @contextmanager
    def workdir(self) -> Iterator[Path]:
        """The stage's checkpoint directory, resumed or started afresh; released once the try succeeds."""
        stale = sweep_stale(self.local.root, older_than=self.store.retention)
        if stale:
            self.log.info("removed %d task-local checkpoints unused for a retention: %s", len(stale), stale)
        inputs, total, pipelined = self._inputs()
        self.decision = restore_decision(self.local.latest(), inputs, pipelined_input=pipelined)
        if not self.decision.resume:
            self.local.start_fresh()
            self.local.fence(inputs, total_bytes=total, try_number=self.try_number)
        self._record()
        yield self.local.path
        self.local.release()

    def _record(self) -> None:
        """The restore point of this try: in the task log, and in the run's history (the failover page,
        ``airflow-ft history``)."""
        assert self.decision is not None
        explanation = self.decision.explain(self.task, self.try_number)
        self.log.info("%s", explanation)
        restored = self.decision.checkpoint if self.decision.resume else None
        RecoveryJournal(self.store, self.run).record(
            {
                "time": time.time(),
                "kind": "checkpoint",
                "task": self.task,
                "try_number": self.try_number,
                "reason": explanation,
                "restored_from": restored.checkpoint_id if restored else None,
            }
        )

    def spec(self, *, fail_in_batch: int | None) -> CheckpointSpec:
        return CheckpointSpec(
            location=self.local.spark_dir.as_uri(),
            max_bytes_per_trigger=self.config.interval_volume,
            fail_in_batch=fail_in_batch,
        )

    def summary(self) -> dict[str, object]:
        """For the try's XCom, once its micro-batches are done: where it started from and why, and what
        it read (from Spark's checkpoint: its file source's log of the files each micro-batch read)."""
        assert self.decision is not None
        restored = self.decision.checkpoint if self.decision.resume else None
        last = self.local.latest()
        read_before = restored.processed_bytes if restored else 0
        return {
            "restored_from": restored.checkpoint_id if restored else None,
            "why": self.decision.why.value,
            "explanation": self.decision.explain(self.task, self.try_number),
            "last_checkpoint": last.checkpoint_id if last else None,
            "input_bytes": last.total_bytes if last else 0,
            "input_bytes_read": (last.processed_bytes if last else 0) - read_before,
        }

    def _inputs(self) -> tuple[dict[str, str], int, bool]:
        """The committed attempt of each blocking input partition, their total size, and whether the
        stage reads a pipelined input."""
        attempts: dict[str, str] = {}
        total, pipelined = 0, False
        for result, partition_ids in self.description.consumed_partitions(self.stage, self.map_index).items():
            if not self.description.graph.results[result].result_type.is_reconsumable:
                pipelined = True
                continue
            for partition_id in partition_ids:
                manifest = self.store.manifest(self.run.parse(partition_id))
                attempts[partition_id] = manifest.attempt_id
                total += manifest.total_size
        return attempts, total, pipelined
