"""The task-local copy of a checkpointed stage (seed 003's secondary copy): a directory on the worker's
disk that outlives the stage's failed tries, so a retry on the same worker resumes from it.

    <root>/<pipeline>/<run>/<task>/
        _ft_fence.json   the committed input attempts the checkpoint is taken against, the total input
        spark/           Spark's checkpointLocation: offsets, commits, sources (+ state)
        in/              the inputs, staged (stable paths: Spark's file source tracks files by path)
        out/<result>/bNNNNNNNNNN/   one directory per micro-batch; a batch run again overwrites its own

Released when the stage's output is committed; a failed try leaves it for the next one. A run that
never succeeds would leave it for ever, so a checkpointed try first removes the task-local
checkpoints on its worker that nothing has written to for a retention (``sweep_stale``).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from airflow_ft_provider.checkpoints.fencing import CompletedCheckpoint
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.naming import encode_segment
from airflow_ft_provider.safe_json import load_json_object

FENCE_FILE = "_ft_fence.json"
DEFAULT_ROOT = Path(tempfile.gettempdir()) / "airflow-ft-checkpoints"


def sweep_stale(root: Path, *, older_than: float, now: float | None = None) -> list[Path]:
    """Remove the task-local checkpoints under ``root`` whose newest file is older than ``older_than``
    seconds (a run that failed for good, or a task that moved to another worker). Returns them."""
    now = time.time() if now is None else now
    removed = []
    for task_dir in sorted(root.glob("*/*/*")) if root.is_dir() else ():
        try:
            newest = max((p.stat().st_mtime for p in task_dir.rglob("*")), default=task_dir.stat().st_mtime)
        except OSError:
            continue  # removed meanwhile by its own try
        if now - newest > older_than:
            shutil.rmtree(task_dir, ignore_errors=True)
            remove_empty_parents(task_dir, root)
            removed.append(task_dir)
    return removed


class LocalCheckpoint:
    def __init__(self, root: Path, run: RunRef, task: str) -> None:
        self.root = root
        self.path = root / encode_segment(run.pipeline) / encode_segment(run.run_id) / encode_segment(task)
        self.spark_dir = self.path / "spark"
        self.fence_file = self.path / FENCE_FILE
        self.input_sizes: dict[str, int] = {}  # "<result>-<n>/<file>" -> bytes, from the manifests

    def last_committed(self) -> int | None:
        """The highest micro-batch in Spark's commits log here (its output and offsets are complete)."""
        commits = self.spark_dir / "commits"
        batch_ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
        return max(batch_ids) if batch_ids else None

    def seconds_between_commits(self) -> list[float]:
        """The time from each completed micro-batch to the next (Spark's commits log, by file time):
        the time between checkpoints that seed 004 keeps bounded under backpressure."""
        commits = self.spark_dir / "commits"
        times = (
            sorted(p.stat().st_mtime for p in commits.iterdir() if p.name.isdigit())
            if commits.is_dir()
            else []
        )
        return [round(b - a, 3) for a, b in itertools.pairwise(times)]

    def latest(self) -> CompletedCheckpoint | None:
        """The last completed micro-batch here, with the input its file source had read by then. None
        when there is none or the fence is unreadable."""
        last = self.last_committed()
        if last is None:
            return None
        try:
            fence = load_json_object(self.fence_file.read_bytes(), max_bytes=1 << 20)
        except (OSError, ValueError):
            return None
        inputs, total, taken_by = fence.get("inputs"), fence.get("total_bytes"), fence.get("try_number")
        if not isinstance(inputs, dict) or not isinstance(total, int) or not isinstance(taken_by, int):
            return None
        return CompletedCheckpoint(last, dict(inputs), self.bytes_read_through(last), total, taken_by)

    def read_through(self, last: int) -> set[str]:
        """The input files the micro-batches up to ``last`` read, as ``<result>-<n>/<file>`` (Spark's
        file-source log; a compacted log file, every tenth batch, repeats the entries before it)."""
        read: set[str] = set()
        feed = self.path / "feed"  # the stream's directory of linked inputs (spark/feed.py)
        for log in sorted((self.spark_dir / "sources" / "0").glob("*")):
            if log.name.startswith("."):
                continue  # a temporary Spark renames (or removes) while we look
            try:
                text = log.read_text(errors="replace")
            except FileNotFoundError:
                continue  # an old log file Spark removed after compacting it
            for line in text.splitlines()[1:]:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and int(entry.get("batchId", last + 1)) <= last:
                    path = urllib.parse.unquote(urllib.parse.urlparse(str(entry.get("path", ""))).path)
                    fed = Path(path).relative_to(feed) if Path(path).is_relative_to(feed) else None
                    if fed is not None and len(fed.parts) > 2:  # <input>/<result>-<n>/<file ...>
                        read.add("/".join(fed.parts[1:]))
        return read

    def bytes_read_through(self, last: int) -> int:
        """The size of every input file the micro-batches up to ``last`` read (``input_sizes``, the
        manifests' sizes: a resumed try does not fetch the files its checkpoint had read)."""
        return sum(self.input_sizes.get(name, 0) for name in self.read_through(last))

    def start_fresh(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True)

    def fence(self, inputs: Mapping[str, str], *, total_bytes: int, try_number: int) -> None:
        """Record what the checkpoints taken from now on are taken against (written before Spark starts)."""
        self.path.mkdir(parents=True, exist_ok=True)
        temp = self.fence_file.with_suffix(".tmp")
        temp.write_text(
            json.dumps({"inputs": dict(inputs), "total_bytes": total_bytes, "try_number": try_number})
        )
        os.replace(temp, self.fence_file)

    def release(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        remove_empty_parents(self.path, self.root)


def remove_empty_parents(path: Path, root: Path) -> None:
    """The run's and the pipeline's directories above a released checkpoint, once empty (nothing is left
    behind on the worker's disk); a directory another try writes into stays (rmdir refuses it)."""
    for parent in (path.parent, path.parent.parent):
        if parent == root or root not in parent.parents:
            return
        try:
            parent.rmdir()
        except OSError:  # not empty (another task of the run), or gone already
            return
