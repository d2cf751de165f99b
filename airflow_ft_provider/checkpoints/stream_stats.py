"""Checkpoint statistics of a checkpointed stage on the executors' data path (seed 003's monitoring).

There a completed micro-batch is the checkpoint: Spark's own checkpoint is on the Spark side, out of
the worker's sight, and each micro-batch's output is in the store under ``b<batch>/``, each writing
task's object with its marker (``spark/object_stream.py``). So the store's listing of those outputs,
taken when the try starts and again when it ends, says what the staged path's uploader counts
(``uploader.CheckpointStats``): which micro-batches completed during the try, how large each is, and
how long the last took (its newest marker's time minus the previous micro-batch's, both on S3's
clock), and how much of the input they cover.

Markers say the micro-batch's tasks wrote their output, not that Spark committed it: a micro-batch is
known to be committed once the next one has a marker (Spark starts a micro-batch after committing the
one before), or once the try has succeeded. So the newest micro-batch of a failed try is not counted,
and a retry names as its restore point the newest micro-batch whose successor has a marker (a lower
bound: Spark's checkpoint, on the Spark side, says where the query goes on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_ft_provider.checkpoints.statistics import TryCheckpoints
from airflow_ft_provider.partitions.s3_objects import ObjectInfo
from airflow_ft_provider.spark.object_stream import task_markers


@dataclass(frozen=True)
class StoredBatch:
    """A micro-batch whose output the store holds (some of it, while it runs)."""

    batch_id: int
    size: int  # bytes of its objects and markers
    recorded_at: float  # its newest marker's last-modified time (S3's clock, epoch seconds)
    etag: str  # its newest marker's: a micro-batch run again writes new ones


def committed_before(stored: Mapping[int, StoredBatch]) -> int | None:
    """The newest micro-batch known to be committed: one whose successor has a marker."""
    return max((b for b in stored if b + 1 in stored), default=None)


def stored_batches(listing: Mapping[str, ObjectInfo], prefix: str) -> dict[int, StoredBatch]:
    """The micro-batches with a task's marker under ``prefix`` (a generation's ``b<batch>/`` folders)."""
    sizes: dict[int, int] = {}
    for key, info in listing.items():
        folder = key.removeprefix(prefix).partition("/")[0]
        if key.startswith(prefix) and folder.startswith("b") and folder[1:].isdigit():
            batch_id = int(folder[1:])
            sizes[batch_id] = sizes.get(batch_id, 0) + info.size
    newest: dict[int, ObjectInfo] = {}
    for marker in task_markers(key.removeprefix(prefix) for key in listing if key.startswith(prefix)):
        info = listing[prefix + marker.key]
        if marker.batch_id not in newest or info.last_modified > newest[marker.batch_id].last_modified:
            newest[marker.batch_id] = info
    return {
        b: StoredBatch(b, sizes[b], info.last_modified, info.etag or "") for b, info in sorted(newest.items())
    }


@dataclass(frozen=True)
class StreamStats:
    """One try's micro-batches, as ``CheckpointStats`` reports the staged path's checkpoints."""

    completed: tuple[StoredBatch, ...]  # during this try, oldest first
    before_last: StoredBatch | None  # the micro-batch before the last completed one, of any try
    processed_bytes: int  # of the input, by the last completed micro-batch
    total_bytes: int

    @classmethod
    def of_try(
        cls,
        at_start: Mapping[int, StoredBatch],
        at_end: Mapping[int, StoredBatch],
        input_sizes: Sequence[int],
        per_batch: int,
        *,
        succeeded: bool,
    ) -> StreamStats:
        """``input_sizes``: the input objects' sizes in the order the stream reads them, ``per_batch``
        at a time. A failed try's newest micro-batch is not known to be committed: not counted."""
        written = [batch for b, batch in sorted(at_end.items()) if at_start.get(b) != batch]  # new, or again
        completed = tuple(written if succeeded else written[:-1])
        last = completed[-1] if completed else None
        before_last = at_end.get(last.batch_id - 1) if last else None
        covered = sum(input_sizes[: (last.batch_id + 1) * per_batch]) if last else 0
        return cls(completed, before_last, covered, sum(input_sizes))

    def describe(self, task: str, try_number: int, *, succeeded: bool) -> str:
        """One sentence for the task log and the history."""
        ended = "succeeded" if succeeded else "failed"
        text = f"{task} try {try_number} {ended}: {len(self.completed)} checkpoints completed, 0 failed"
        if self.completed:
            last = self.completed[-1]
            share = 100 * self.processed_bytes / self.total_bytes if self.total_bytes else 100.0
            text += (
                f"; the last, micro-batch {last.batch_id}, covers {share:.0f} % of the input ({last.size} B"
            )
            duration = self._last_duration()
            text += f", {duration:.2f} s)" if duration is not None else ")"
        return text

    def as_dict(self) -> dict[str, object]:
        """As the staged path's (``statistics.TryCheckpoints``). No failed ones: a micro-batch that
        fails fails the try (Spark has no tolerable failures)."""
        last = self.completed[-1] if self.completed else None
        return TryCheckpoints(
            completed=len(self.completed),
            processed_bytes=self.processed_bytes if last else None,
            total_bytes=self.total_bytes if last else None,
            last_completed=last.batch_id if last else None,
            last_duration=self._last_duration(),
            last_size=last.size if last else None,
            last_incremental_size=last.size if last else None,  # each holds only its own output
            uploaded_bytes=sum(batch.size for batch in self.completed),
        ).as_dict()

    def _last_duration(self) -> float | None:
        """Seconds from the previous micro-batch's newest marker to the last one's (S3's clock)."""
        if not self.completed or self.before_last is None:
            return None
        seconds = self.completed[-1].recorded_at - self.before_last.recorded_at
        return round(seconds, 3) if seconds > 0 else None
