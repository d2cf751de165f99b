"""The try of a checkpointed stage: it works in the stage's task-local checkpoint directory, which it
resumes from only if the inputs are the committed attempts the checkpoint was taken against.

A try that fails leaves the directory for the next try on this worker; the try that commits the
stage's output releases it. The decision (resume or fresh, and why) goes to the task log, to the
run's history (journal event ``checkpoint``) and to the try's ``ft_partitions`` XCom.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from airflow_ft_provider import metrics
from airflow_ft_provider.checkpoints.config import CheckpointConfig
from airflow_ft_provider.checkpoints.fencing import CompletedCheckpoint, RestoreDecision, restore_decision
from airflow_ft_provider.checkpoints.local import DEFAULT_ROOT, LocalCheckpoint, sweep_stale
from airflow_ft_provider.checkpoints.snapshot import (
    CheckpointMetadata,
    InvalidCheckpoint,
    relocate_source_logs,
)
from airflow_ft_provider.checkpoints.store_copy import Fence, StoreCheckpoints
from airflow_ft_provider.checkpoints.uploader import CheckpointUploader
from airflow_ft_provider.recovery.journal_events import CheckpointRestored
from airflow_ft_provider.spark.spec import CheckpointSpec
from airflow_ft_provider.stage_try.checkpoint_report import report_checkpoints
from airflow_ft_provider.stage_try.run_mode import RunFinished
from airflow_ft_provider.stage_try.scope import TryScope


class CheckpointFailure(RuntimeError):
    """More checkpoints failed in a row than ``tolerable-failed-checkpoints`` allows."""


ROOT_KEY = "checkpoint_local_dir"  # [ft_provider]: where task-local checkpoints live (default: tmp)


def local_root() -> Path:
    from airflow.sdk import conf

    return Path(conf.get("ft_provider", ROOT_KEY, fallback=None) or DEFAULT_ROOT)


class CheckpointedTry:
    def __init__(self, scope: TryScope, config: CheckpointConfig, *, kill: Callable[[], None]) -> None:
        self.scope = scope
        self.config = config
        self.store = scope.store
        self.task = scope.task
        self.try_number = scope.try_number
        self.log = scope.log
        self.kill = kill
        self.local = LocalCheckpoint(local_root(), scope.run, self.task)
        self.copy = StoreCheckpoints(scope.store, scope.run, self.task)
        self.decision: RestoreDecision | None = None
        self.uploader: CheckpointUploader | None = None
        self.restored_via: str | None = None  # "local" or "store"
        self.restored_bytes = 0
        self.restored: CheckpointMetadata | None = None
        self.processed: set[str] = set()  # input files ("<result>-<n>/<file>") the restored checkpoint read
        self._newest: CheckpointMetadata | None = None  # the store's newest checkpoint, restored or not
        self._damage: str | None = None
        self._schema_files: set[str] = set()  # the first file of each input's partition 0

    @contextmanager
    def workdir(self) -> Iterator[Path]:
        """The stage's checkpoint directory, restored or started afresh, with its checkpoints copied to the
        store while the try runs; released (both copies) once the try has committed its output."""
        stale = sweep_stale(self.local.root, older_than=self.store.retention)
        if stale:
            self.log.info("removed %d task-local checkpoints unused for a retention: %s", len(stale), stale)
        inputs, total, pipelined = self._inputs()
        restored = None if pipelined else self._restore(inputs)
        newest = restored or self._newest
        self.decision = restore_decision(
            _completed(newest) if newest else None,
            inputs,
            pipelined_input=pipelined,
            damage=self._damage if restored is None else None,
        )
        if not self.decision.resume:
            self.local.start_fresh()
            self.copy.release()  # taken against other inputs, or by another execution of the region
        self.local.fence(inputs, total_bytes=total, try_number=self.try_number)
        if restored is not None:  # read by the committed micro-batches: not fetched again
            self.processed = self.local.read_through(restored.checkpoint_id) - self._schema_files
        self._record()
        fence = Fence(inputs, total, self.try_number)
        taken = restored.checkpoint_id if restored else None
        self.restored = restored
        self.uploader = CheckpointUploader(
            self.copy, self.local, self.config, fence, taken=taken, on_intolerable=self._intolerable
        ).start()
        try:
            yield self.local.path
        except BaseException as failure:
            self.uploader.stop(drain=True)
            self._record_statistics(succeeded=False)
            if self.uploader.intolerable is not None:
                raise CheckpointFailure(f"{self.task}: {self.uploader.intolerable}") from failure
            raise
        self.uploader.stop(drain=False)
        self._record_statistics(succeeded=True)
        self.local.release()
        self.copy.release()

    def finish(self) -> RunFinished:
        """The micro-batches are done: take the final checkpoint (Flink takes one at the end of input
        too: a worker lost during the commit leaves nothing to redo) and stop copying; then name the
        output files the store has, for the commit to copy inside S3 instead of uploading them again."""
        assert self.uploader is not None
        self.uploader.stop(drain=True)
        newest = self.uploader.stats.completed[-1] if self.uploader.stats.completed else self.restored
        stored = self.copy.stored_outputs(newest, self.local.path) if newest else {}
        return RunFinished(stored, self.summary())

    def _record_statistics(self, *, succeeded: bool) -> None:
        assert self.uploader is not None
        report_checkpoints(self.scope, self.uploader.stats, succeeded=succeeded)

    def _restore(self, inputs: dict[str, str]) -> CheckpointMetadata | None:
        """The newest completed checkpoint of the store taken against ``inputs``, made the task-local
        directory: the verified local copy (local recovery), else downloaded; an older one if its
        objects are damaged. None: start fresh (``_newest`` and ``_damage`` say why)."""
        for candidate in self.copy.candidates():
            self._newest = self._newest or candidate
            if dict(candidate.inputs) != inputs:
                return None  # fenced out: every older one was taken against the same (other) inputs
            if self.config.local_recovery:
                wrong = self.copy.verify_local(candidate, self.local.path)
                if wrong is None:
                    self.restored_via = "local"
                    return candidate
                self.log.info(
                    "%s: the local copy of checkpoint %d is unusable (%s): restoring it from the store",
                    self.task,
                    candidate.checkpoint_id,
                    wrong,
                )
            self.local.start_fresh()
            try:
                self.restored_bytes = self.copy.restore(candidate, self.local.path)
            except InvalidCheckpoint as err:
                self._damage = self._damage or f"checkpoint {candidate.checkpoint_id}: {err}"
                self.log.warning("%s: %s; trying an older checkpoint", self.task, self._damage)
                continue
            relocate_source_logs(self.local.path, candidate.local_path)
            self.restored_via = "store"
            self.log.info(
                "%s: restored checkpoint %d from the store: %d bytes fetched; %d bytes of output left "
                "there, for the commit to copy inside S3",
                self.task,
                candidate.checkpoint_id,
                self.restored_bytes,
                candidate.size - self.restored_bytes,
            )
            return candidate
        return None

    def _intolerable(self, reason: str) -> None:
        self.log.error("%s: %s; failing the try", self.task, reason)
        self.kill()

    def _record(self) -> None:
        """The restore point of this try: in the task log, and in the run's history (the failover page,
        ``airflow-ft history``)."""
        assert self.decision is not None
        explanation = self.decision.explain(self.task, self.try_number)
        self.log.info("%s", explanation)
        restored = self.decision.checkpoint if self.decision.resume else None
        if restored is not None and self.restored_via:
            metrics.restored(self.restored_via, dag_id=self.scope.run.pipeline, task_id=self.task)
        self.scope.recovery.record_try(
            CheckpointRestored(
                task=self.task,
                try_number=self.try_number,
                reason=explanation,
                restored_from=restored.checkpoint_id if restored else None,
                restored_via=self.restored_via,
            )
        )

    def spec(self, *, fail_in_batch: int | None) -> CheckpointSpec:
        return CheckpointSpec(
            location=self.local.spark_dir.as_uri(),
            max_bytes_per_trigger=self.config.interval_volume,
            fail_in_batch=fail_in_batch,
            changelog=self.config.incremental,
            interval_seconds=self.config.interval,
        )

    def summary(self) -> dict[str, object]:
        """For the try's XCom (``finish``): where it started from and why, and what
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
            "restored_via": self.restored_via,
            "restored_bytes": self.restored_bytes,
            "seconds_between_checkpoints": self.local.seconds_between_commits(),
            "checkpoints": self.uploader.stats.as_dict() if self.uploader else {},
        }

    def _inputs(self) -> tuple[dict[str, str], int, bool]:
        """The committed attempt of each blocking input partition, their total size, and whether the
        stage reads a pipelined input."""
        attempts: dict[str, str] = {}
        total, pipelined = 0, False
        results = self.scope.description.graph.results
        for result, partition_ids in self.scope.consumed().items():
            if not results[result].result_type.is_reconsumable:
                pipelined = True
                continue
            for number, partition_id in enumerate(partition_ids):
                manifest = self.store.manifest(self.scope.run.parse(partition_id))
                attempts[partition_id] = manifest.attempt_id
                total += manifest.total_size
                for entry in manifest.files:  # staged as in/<result>-<n>/<file> (placement.StagedFiles)
                    self.local.input_sizes[f"{result}-{number}/{entry.name}"] = entry.size
                if number == 0 and manifest.files:  # always fetched: the stream reads its schema there
                    self._schema_files.add(f"{result}-0/{manifest.files[0].name}")
        return attempts, total, pipelined


def _completed(metadata: CheckpointMetadata) -> CompletedCheckpoint:
    return CompletedCheckpoint(
        metadata.checkpoint_id,
        dict(metadata.inputs),
        metadata.processed_bytes,
        metadata.total_bytes,
        metadata.taken_by_try,
    )
