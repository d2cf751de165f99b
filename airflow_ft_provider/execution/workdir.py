"""A try's private scratch directory on the worker, and the removal of those that killed tries left.

Local staging writes a stage's outputs (and fetches its inputs) under this directory. A try that ends,
however it fails, removes its own; a try whose process is killed (SIGKILL, the OOM killer) cannot, and
on a worker that keeps running, a stage that is killed every few days would fill the disk with staged
partitions. So each new try first removes the directories whose owner is gone.

Ownership is an ``flock`` held for the try's lifetime: the kernel drops it when the process dies, however
it dies, and it means the same across PID namespaces (containers sharing a temporary directory) and
after a PID is reused, where a recorded PID would not.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from airflow_ft_provider.task_log import TaskLog

__all__ = ["TryWorkdir", "adopt_abandoned", "keep_for_next_try", "remove_abandoned"]

PREFIX = "ft-stage-"
OWNER_FILE = ".owner"
# A directory with no owner file was either made by a release before this module, or is being set up
# right now (the owner file appears within microseconds of the directory): removed only once this old.
UNOWNED_GRACE_SECONDS = 600.0
# A killed try whose output is complete, or being written by a Spark Connect server that outlives it
# (``keep_for_next_try``), leaves it for the task's next try to adopt (stage_try/adoption.py): other
# tries' sweeps keep it this long.
ADOPTABLE_FILE = ".adoptable"
ADOPTION_GRACE_SECONDS = 3600.0


class TryWorkdir:
    """``with TryWorkdir(log=log) as path:`` a new directory, owned until the block ends, then removed.

    Entering first removes the directories of earlier tries whose owner process is gone (see the
    module's docstring); ``removed`` lists them, for the try's log."""

    def __init__(self, base: str | os.PathLike[str] | None = None, *, log: TaskLog | None = None) -> None:
        self.base = Path(base if base is not None else tempfile.gettempdir())
        self.log = log
        self.path: Path | None = None
        self.removed: list[Path] = []
        self._owner_fd: int | None = None

    def __enter__(self) -> Path:
        self.removed = remove_abandoned(self.base)
        if self.removed and self.log is not None:
            self.log.info(
                "removed %d scratch directories of killed tries: %s",
                len(self.removed),
                ", ".join(str(p) for p in self.removed),
            )
        path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=self.base))
        # Locked before it has its final name: a sweeper that can open OWNER_FILE finds it locked.
        pending = path / (OWNER_FILE + ".pending")
        fd = os.open(pending, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # nobody else can hold it yet: never waits
        os.rename(pending, path / OWNER_FILE)
        self.path, self._owner_fd = path, fd
        if self.log is not None:
            self.log.info("scratch directory of this try: %s", path)
        return path

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
        if self._owner_fd is not None:
            os.close(self._owner_fd)
        self.path, self._owner_fd = None, None


def remove_abandoned(base: str | os.PathLike[str], *, now: float | None = None) -> list[Path]:
    """Remove the scratch directories under ``base`` whose owner is gone; return them.

    Only real directories of this user are considered (never a symlink, nor another user's directory in
    a shared ``/tmp``); one whose owner still holds its lock is kept."""
    now = time.time() if now is None else now
    removed = []
    for candidate in Path(base).glob(PREFIX + "*"):
        try:
            info = candidate.lstat()
        except FileNotFoundError:
            continue  # removed by its owner or another sweeper meanwhile
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        if _remove_if_abandoned(candidate, info.st_mtime, now):
            removed.append(candidate)
    return removed


def _remove_if_abandoned(directory: Path, mtime: float, now: float) -> bool:
    """Remove ``directory`` if no live try owns it; True if it is gone."""
    try:
        if now - (directory / ADOPTABLE_FILE).lstat().st_mtime < ADOPTION_GRACE_SECONDS:
            return False  # finished output its task's next try may adopt
    except FileNotFoundError:
        pass
    with _dead_owner(directory) as dead:
        if dead is None:
            return now - mtime >= UNOWNED_GRACE_SECONDS and _remove(directory)
        return dead and _remove(directory)  # still holding the lock: no other sweeper races


@contextmanager
def _dead_owner(directory: Path) -> Iterator[bool | None]:
    """Holds the lock of ``directory``'s owner file while its try is dead (True); False when a live try
    holds it, or the file is a symlink or else not ours to judge; None when there is no owner file."""
    try:
        fd = os.open(directory / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        yield None
        return
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False  # its try is running
            return
        yield True
    finally:
        os.close(fd)


def _remove(directory: Path) -> bool:
    shutil.rmtree(directory, ignore_errors=True)
    return not directory.exists()


@contextmanager
def adopt_abandoned(directory: str | os.PathLike[str]) -> Iterator[bool]:
    """Use a killed try's scratch directory (its finished output), then remove it: yields True while
    holding its lock, so that no sweeper removes it meanwhile; False when a live try still owns it or it
    is gone."""
    path = Path(directory)
    with _dead_owner(path) as dead:
        if not dead:
            yield False  # gone, or its try is alive and commits its own output
            return
        try:
            yield True
        finally:
            _remove(path)


def keep_for_next_try(directory: str | os.PathLike[str]) -> None:
    """The try owning ``directory`` wrote every output, or a Spark Connect server is writing them: should
    the try be killed before its commit, sweeps keep the directory for ``ADOPTION_GRACE_SECONDS`` so
    that the task's next try can adopt it."""
    (Path(directory) / ADOPTABLE_FILE).touch()
