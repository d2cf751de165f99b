"""How much input each micro-batch of a checkpointed stage admits, so that checkpoints stay frequent
under backpressure (seed 004).

Spark's file source plans a micro-batch from the files it can see. The stream therefore reads a feed
directory, and the feeder links the staged input files into it one chunk at a time: the next chunk as
soon as Spark has planned the previous one. A chunk is sized from the last completed micro-batch's
rate so that a micro-batch takes about 0.8× ``execution.checkpointing.interval``, never more input
than ``interval-volume``; the first chunk is one file (a probe), and nothing more is fed until its rate
is known. A resumed query takes its rate from the restored log instead (Spark records when it planned
each micro-batch), so it needs no probe. A slow sink (or operator) makes the
chunks smaller, so the time between completed checkpoints stays near the interval instead of growing
with the slowness.

Spark tracks input files by path: a resumed query finds the feed directory rebuilt with every file its
log names, and the feeder goes on with the files not seen yet. Stdlib only: this runs in the Spark
driver of a spark-submit stage too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from .failure_report import InjectedFailure, injected_in_batch

HEADROOM = 0.8  # a micro-batch aims at this share of the interval
FEED_POLL_SECONDS = 0.1  # the checkpoint's files (local)
ACTIVE_POLL_SECONDS = 0.5  # whether the query still runs (a call to the server)
PROGRESS_WAIT_SECONDS = 1.0  # a committed batch without input reports no duration


@dataclass(frozen=True)
class FedFile:
    staged: str  # the input file as staged (local path)
    fed: str  # its link in the feed directory (the path Spark sees)
    size: int


@dataclass
class Feeder:
    files: list[FedFile]  # in feeding order
    spark_dir: str  # the query's checkpointLocation (local path)
    volume: int  # interval-volume: the most input a micro-batch admits
    target: float  # interval: the time a micro-batch aims at (seconds)
    fed: set[str] = field(default_factory=set)
    credit: int = 0  # bytes the next chunk admits; 0 = one file (no rate measured yet)
    sized_batches: set[int] = field(default_factory=set)
    feed_root: str = ""  # the directory the stream reads (``fed`` paths are below it)
    fail_in: int | None = None  # fault injection: the micro-batch to fail inside (ft_faults)
    poison: str | None = None  # the file that fails it, once fed

    def __post_init__(self) -> None:
        self._by_fed = {f.fed: f for f in self.files}

    def resume(self) -> int:
        """Link every file Spark's log names (a restored checkpoint's, or a failed try's planned batch):
        the query re-runs or skips them by path, and the next chunk is sized from the rate the log
        shows. Returns how many files are linked."""
        for path in self._logged():
            self._link(path)
        self.credit = self._credit_from_log()
        return len(self.fed)

    def feed_if_planned(self, last_committed: int | None) -> None:
        """Feed the next chunk once Spark has planned every file fed so far; without a rate, once the
        probe's micro-batch is committed too (a second probe only if the first showed no rate)."""
        logged = self._logged_by_batch()
        planned = {p for paths in logged.values() for p in paths}
        if self.fed - planned:
            return
        if not self.credit and self.fed:
            through = -1 if last_committed is None else last_committed
            done = {p for batch, paths in logged.items() if batch <= through for p in paths}
            if self.fed - done:
                return  # the probe is running: its rate sizes the next chunk
        pending = [f for f in self.files if f.fed not in self.fed]
        if self.fail_in is not None and self.poison is None and max(logged, default=-1) + 1 == self.fail_in:
            self._feed_poison()
        chunk: list[FedFile] = []
        size = 0
        for file in pending:
            if chunk and size + file.size > (self.credit or 1):
                break
            chunk.append(file)
            size += file.size
            if not self.credit:
                break  # the probe: one file
        for file in chunk:
            self._link(file.fed)

    def _feed_poison(self) -> None:
        """Fault injection: a file that is not Parquet, in the next micro-batch (``fail_in``): Spark's
        job fails inside the batch, after its other tasks may have written their files. Older than the
        input (Spark plans the oldest files first), so no volume limit pushes it to a later batch."""
        if not self.files or not self.feed_root:
            return
        self.poison = os.path.join(self.feed_root, f"ft-injected-failure-{self.fail_in}.parquet")
        with open(self.poison, "wb") as poison:
            poison.write(b"not a Parquet file: an injected failure (ft_faults)\n")
        oldest = min(os.stat(f.staged).st_mtime for f in self.files) - 1
        os.utime(self.poison, (oldest, oldest))

    def remove_poison(self) -> None:
        """Once the try failed: a retry in this directory must not read it again."""
        if self.poison is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.poison)

    def injected(self, failure: Exception, fail_in: int | None) -> InjectedFailure | None:
        """The injected fault inside micro-batch ``fail_in``, when it is what failed the query (the
        poisoned file, or what foreachBatch raised); the poison is removed. Spark's own error would
        mislabel it (a file that is not Parquet, a foreachBatch wrapper)."""
        said = injected_in_batch(fail_in)
        poisoned = self.poison is not None and os.path.basename(self.poison) in str(failure)
        if fail_in is None or not (poisoned or said in str(failure)):
            return None
        self.remove_poison()
        return InjectedFailure(said)

    def observe(self, batches: dict[int, float]) -> None:
        """Size the next chunk from completed micro-batches (batch id -> seconds it took)."""
        new = sorted(set(batches) - self.sized_batches)
        logged = self._logged_by_batch() if new else {}  # polled every 0.1 s: read only when needed
        for batch_id in new:
            self.sized_batches.add(batch_id)
            seconds = batches[batch_id]
            size = sum(self._size(p) for p in logged.get(batch_id, ()))
            if seconds > 0 and size > 0:
                self.credit = self._credit(size, seconds)

    def _credit(self, size: int, seconds: float) -> int:
        """The chunk that takes HEADROOM of the interval at ``size`` bytes in ``seconds``."""
        return max(1, min(self.volume, int(size / seconds * self.target * HEADROOM)))

    def _credit_from_log(self) -> int:
        """The rate of the newest logged micro-batch whose successor was planned too: its input over
        the time between the two plannings (``batchTimestampMs`` of Spark's offsets log). 0 if none."""
        folder = os.path.join(self.spark_dir, "offsets")
        planned_at: dict[int, int] = {}
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            if not name.isdigit():
                continue
            try:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as log:
                    metadata = json.loads(log.read().splitlines()[1])
                planned_at[int(name)] = int(metadata["batchTimestampMs"])
            except (OSError, IndexError, ValueError, KeyError, TypeError):
                continue
        logged = self._logged_by_batch()
        for batch in sorted(planned_at, reverse=True):
            if batch + 1 not in planned_at:
                continue
            seconds = (planned_at[batch + 1] - planned_at[batch]) / 1000
            size = sum(self._size(p) for p in logged.get(batch, ()))
            if seconds > 0 and size > 0:
                return self._credit(size, seconds)
        return 0

    def finished(self, last_committed: int | None) -> bool:
        """Every file fed, and every one of them in a committed micro-batch."""
        if len(self.fed) < len(self.files) or last_committed is None:
            return False
        logged = self._logged_by_batch()
        done = {p for batch, paths in logged.items() if batch <= last_committed for p in paths}
        return self.fed <= done

    # -- Spark's file-source log: sources/0/<batch> ("v1" then one JSON line per file) -------------
    def _logged_by_batch(self) -> dict[int, set[str]]:
        by_batch: dict[int, set[str]] = {}
        folder = os.path.join(self.spark_dir, "sources", "0")
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
            if name.startswith("."):
                continue
            try:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as log:
                    lines = log.read().splitlines()[1:]
            except FileNotFoundError:
                continue
            for line in lines:
                try:
                    entry = json.loads(line)
                    batch, path = int(entry["batchId"]), urllib.parse.urlparse(entry["path"]).path
                except (ValueError, KeyError, TypeError):
                    continue
                by_batch.setdefault(batch, set()).add(urllib.parse.unquote(path))
        return by_batch

    def _logged(self) -> set[str]:
        return {p for paths in self._logged_by_batch().values() for p in paths}

    def _size(self, fed: str) -> int:
        file = self._by_fed.get(fed)
        return file.size if file else 0

    def _link(self, fed: str) -> None:
        file = self._by_fed.get(fed)
        staged = file.staged if file else None
        if staged is None:
            return  # not an input of this try (the log of another input set: fenced out before)
        os.makedirs(os.path.dirname(fed), exist_ok=True)
        if not os.path.exists(fed):
            try:
                os.link(staged, fed)
            except OSError:  # another file system, or no hard links: a copy has the same bytes
                shutil.copyfile(staged, fed)
        self.fed.add(fed)


def batch_seconds(progress: list[object]) -> dict[int, float]:
    """Completed micro-batches' durations from a query's ``recentProgress``."""
    seconds = {}
    for p in progress:
        durations = getattr(p, "durationMs", None) or {}
        total = durations.get("triggerExecution") if isinstance(durations, dict) else None
        batch = getattr(p, "batchId", None)
        rows = getattr(p, "numInputRows", 0) or 0
        if isinstance(batch, int) and isinstance(total, (int, float)) and rows > 0:
            seconds[batch] = total / 1000
    return seconds


def feed_until_done(query: Any, feeder: Feeder, checkpoint: str) -> dict[str, float]:
    """Admit the input chunk by chunk (``feed.Feeder``) until all of it is in committed micro-batches,
    then stop the idle query; a failed query's error is raised. Returns each batch's seconds.

    The checkpoint's own files say what is planned and committed; the query (a call to the Spark
    Connect server) is asked for its progress only after a commit, and whether it still runs twice
    a second, so the polling takes no time from the micro-batches."""
    commits = os.path.join(checkpoint, "commits")
    seconds: dict[int, float] = {}
    seen = noticed = None  # the newest committed batch whose progress was read, and was noticed
    asked = noticed_at = 0.0
    while True:
        committed = [int(n) for n in os.listdir(commits) if n.isdigit()] if os.path.isdir(commits) else []
        last_committed = max(committed, default=None)
        if last_committed != seen:  # its progress is reported just after the commit: ask until it is
            if last_committed != noticed:
                noticed, noticed_at = last_committed, time.monotonic()
            seconds.update(batch_seconds(query.recentProgress))
            feeder.observe(seconds)
            if last_committed in seconds or time.monotonic() - noticed_at > PROGRESS_WAIT_SECONDS:
                seen = last_committed
        if feeder.finished(last_committed):
            query.stop()
            break
        feeder.feed_if_planned(last_committed)
        if time.monotonic() - asked >= ACTIVE_POLL_SECONDS:
            asked = time.monotonic()
            if not query.isActive:
                break
        time.sleep(FEED_POLL_SECONDS)
    query.awaitTermination()  # raises the query's failure
    seconds.update(batch_seconds(query.recentProgress))
    return {str(batch): round(s, 3) for batch, s in sorted(seconds.items())}


def staged_feeder(
    input_name: str, uris: list[str], checkpoint_location: str, *, volume: int, target: float
) -> Feeder:
    """A feeder of a staged input's files (under the task's ``in/``) into ``feed/<input>/`` beside the
    checkpoint; ValueError for a file staged anywhere else."""
    task_dir = os.path.dirname(checkpoint_location.rstrip("/"))
    staged_root = os.path.join(task_dir, "in")
    feed_root = os.path.join(task_dir, "feed", input_name)
    files = []
    for uri in uris:
        staged = uri.removeprefix("file://")
        relative = os.path.relpath(staged, staged_root)
        if relative.startswith(".."):
            raise ValueError(f"{staged} is not staged under {staged_root}")
        files.append(FedFile(staged, os.path.join(feed_root, relative), os.path.getsize(staged)))
    return Feeder(files, checkpoint_location, volume=volume, target=target, feed_root=feed_root)
