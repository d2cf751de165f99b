"""Copies each completed micro-batch of a running checkpointed stage to the store (the primary copy).

A thread beside the Spark application watches the task-local commits log. When micro-batch *k*
commits, and ``min-pause`` has passed since the previous checkpoint completed, it uploads checkpoint
*k* (``StoreCheckpoints.take``) and keeps ``num-retained`` of them. An upload that fails or outlasts
``timeout`` is a failed checkpoint; more than ``tolerable-failed-checkpoints`` of them in a row fail the
try (``on_intolerable``), as Flink fails the job. When the try fails, ``stop(drain=True)`` uploads the
last completed micro-batch first, so a retry on another worker loses nothing the failed try finished;
a killed worker drains nothing, and its retry resumes from the last upload.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from airflow_ft_provider.checkpoints.config import CheckpointConfig
from airflow_ft_provider.checkpoints.local import LocalCheckpoint
from airflow_ft_provider.checkpoints.snapshot import CheckpointMetadata
from airflow_ft_provider.checkpoints.statistics import TryCheckpoints
from airflow_ft_provider.checkpoints.store_copy import Fence, StoreCheckpoints

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2


@dataclass
class CheckpointStats:
    """Seed 003's checkpoint monitoring, for one try: what completed, what failed, and how long."""

    completed: list[CheckpointMetadata] = field(default_factory=list)
    failed: int = 0
    failures: list[str] = field(default_factory=list)  # the reasons, newest last (at most 5)

    def failed_one(self, reason: str) -> None:
        self.failed += 1
        self.failures = [*self.failures[-4:], reason]

    def describe(self, task: str, try_number: int, *, succeeded: bool) -> str:
        """One sentence for the task log and the history."""
        ended = "succeeded" if succeeded else "failed"
        done = len(self.completed)
        text = f"{task} try {try_number} {ended}: {done} checkpoints completed, {self.failed} failed"
        if self.completed:
            last = self.completed[-1]
            share = 100 * last.processed_bytes / last.total_bytes if last.total_bytes else 100.0
            took = last.completed - last.started
            text += (
                f"; the last, {last.checkpoint_id}, covers {share:.0f} % of the input "
                f"({_size(last.size)}, {_size(last.uploaded_bytes)} new, {took:.2f} s)"
            )
        return text

    def as_dict(self) -> dict[str, object]:
        last = self.completed[-1] if self.completed else None
        return TryCheckpoints(
            completed=len(self.completed),
            failed=self.failed,
            failures=list(self.failures),
            processed_bytes=last.processed_bytes if last else None,
            total_bytes=last.total_bytes if last else None,
            last_completed=last.checkpoint_id if last else None,
            last_duration=round(last.completed - last.started, 3) if last else None,
            last_size=last.size if last else None,
            last_incremental_size=last.uploaded_bytes if last else None,
            uploaded_bytes=sum(m.uploaded_bytes for m in self.completed),
        ).as_dict()


class CheckpointUploader:
    def __init__(
        self,
        copy: StoreCheckpoints,
        local: LocalCheckpoint,
        config: CheckpointConfig,
        fence: Fence,
        *,
        taken: int | None,
        on_intolerable: Callable[[str], None],
    ) -> None:
        self.copy = copy
        self.local = local
        self.config = config
        self.fence = fence
        self.taken = taken  # the newest checkpoint in the store (the one resumed from, or None)
        self.on_intolerable = on_intolerable
        self.stats = CheckpointStats()
        self.intolerable: str | None = None
        self._consecutive_failures = 0
        self._failed_at: int | None = None  # a failed micro-batch is retried once a later one commits
        self._last_completed = float("-inf")
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one checkpoint at a time: the thread's, or the drain's
        self._thread = threading.Thread(target=self._watch, name=f"ft-checkpoints-{copy.task}", daemon=True)

    def start(self) -> CheckpointUploader:
        self._thread.start()
        return self

    def stop(self, *, drain: bool) -> None:
        """Stop watching; with ``drain`` then upload the last completed micro-batch (a failed try's, or
        the final one before the commit)."""
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join()
        if drain and self.intolerable is None:
            self._take_newest(respect_pause=False)

    def _watch(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self._take_newest(respect_pause=True)
            if self.intolerable is not None:
                return

    def _take_newest(self, *, respect_pause: bool) -> None:
        with self._lock:
            newest = self.local.last_committed()
            if newest is None or (self.taken is not None and newest <= self.taken):
                return
            if respect_pause and newest == self._failed_at:
                return
            if respect_pause and time.monotonic() - self._last_completed < self.config.min_pause:
                return
            started = time.monotonic()
            try:
                metadata = self.copy.take(
                    self.local.path,
                    newest,
                    self.fence,
                    processed_bytes=self.local.bytes_read_through(newest),
                    compress=self.config.snapshot_compression,
                    deadline=started + self.config.timeout,
                )
                self.copy.retain(self.config.num_retained)
            except Exception as err:  # noqa: BLE001 - a failed checkpoint is counted, not raised
                self._failed(newest, err)
                return
            self.taken, self._last_completed, self._consecutive_failures = newest, time.monotonic(), 0
            self.stats.completed.append(metadata)
            log.info(
                "%s: checkpoint %d completed in %.2f s (%d bytes, %d new)",
                self.copy.task,
                newest,
                metadata.completed - metadata.started,
                metadata.size,
                metadata.uploaded_bytes,
            )

    def _failed(self, checkpoint_id: int, err: Exception) -> None:
        self._failed_at = checkpoint_id
        reason = f"checkpoint {checkpoint_id} failed: {type(err).__name__}: {err}"
        self.stats.failed_one(reason)
        self._consecutive_failures += 1
        tolerable = self.config.tolerable_failed
        log.warning(
            "%s: %s (%d in a row, %d tolerable)",
            self.copy.task,
            reason,
            self._consecutive_failures,
            tolerable,
        )
        if self._consecutive_failures > tolerable:
            self.intolerable = (
                f"{self._consecutive_failures} checkpoints failed in a row, more than "
                f"execution.checkpointing.tolerable-failed-checkpoints={tolerable}; last: {reason}"
            )
            self.on_intolerable(self.intolerable)


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return str(count)
