"""A second machine for Spark, on this one: a mount namespace that shares only the network with the
Airflow side (and the S3 endpoint through it).

Spark on a real cluster runs on other hosts: its driver and executors see none of the Airflow worker's
files, and the worker none of theirs. A test that passes with Spark in a :class:`SparkHost` cannot rely
on a shared disk:

* ``/tmp`` is a private, empty tmpfs (the Airflow side's temporary folders, the tests' ``tmp_path``,
  any staged input: none of it is there), and so is every folder named in ``hidden``;
* the repository is hidden, so our own modules reach Spark only as a real deployment ships them (the
  per-try runtime zip); the virtual environment stays, as Spark's installation on that host (pyspark,
  pyarrow, Java are what each Spark host needs).

The namespace lives as long as a holder process (this file run as ``python spark_host.py HIDE...`` under
``unshare --mount``); Spark's processes join it with ``nsenter``, so each is a process of its
own that a scenario can kill. The Airflow side reads the host's files through ``/proc/<holder>/root``
(:meth:`SparkHost.path`), as an operator would fetch a log from another machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

REPOSITORY = Path(__file__).resolve().parents[2]
READY = "spark host ready"


class SparkHost:
    """``host = SparkHost().start(); host.popen([...]); host.path(p); host.stop()``."""

    def __init__(self, hidden: Iterable[Path | str] = ()) -> None:
        self.hidden = [Path("/tmp"), REPOSITORY, *map(Path, hidden)]
        self.holder: subprocess.Popen[str] | None = None

    def start(self) -> SparkHost:
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", sys.executable, __file__]
            + [str(p) for p in self.hidden],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
            start_new_session=True,
        )
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline().strip()
        if line != READY:
            self.stop()
            raise RuntimeError(
                f"the Spark host's namespace did not start (said {line!r}; unshare needs root)"
            )
        return self

    @property
    def pid(self) -> int:
        if self.holder is None:
            raise RuntimeError("the Spark host is not started")
        return self.holder.pid

    def command(self, argv: Sequence[str], *, cwd: str = "/") -> list[str]:
        """``argv`` run inside the host, in ``cwd`` there."""
        return ["nsenter", f"--target={self.pid}", "--mount", f"--wd={cwd}", "--", *argv]

    def popen(
        self, argv: Sequence[str], *, env: dict[str, str], log: IO[Any], cwd: str = "/"
    ) -> subprocess.Popen[bytes]:
        """A process of the host (``nsenter`` execs it: the pid is the program's), in a process group
        of its own, its output in ``log`` (a file of the Airflow side, where the tests read it)."""
        return subprocess.Popen(
            self.command(argv, cwd=cwd),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(argv), capture_output=True, text=True, **kwargs)

    def path(self, path: Path | str) -> Path:
        """Where the Airflow side reads the host's ``path``."""
        return Path(f"/proc/{self.pid}/root") / Path(path).relative_to("/")

    def stop(self) -> None:
        """The holder ends; the namespace (and its tmpfs) goes with its last process."""
        if self.holder is None:
            return
        try:
            os.killpg(self.holder.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.holder.pid, signal.SIGKILL)
            self.holder.wait(timeout=10)
        self.holder = None

    def __enter__(self) -> SparkHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def _hold(hidden: list[Path]) -> None:
    """In the new mount namespace: hide ``hidden`` behind empty tmpfs mounts, keep the virtual
    environment where it was (a bind mount of the directory opened before hiding), say ready, wait."""
    venv = Path(sys.prefix)
    kept = os.open(venv, os.O_RDONLY | os.O_DIRECTORY)
    for folder in sorted(hidden, key=lambda p: len(p.parts)):
        if folder.is_dir():
            _mount("-t", "tmpfs", "-o", "mode=1777", "ft-spark-host", str(folder))
    if any(venv.is_relative_to(folder) for folder in hidden):
        venv.mkdir(parents=True, exist_ok=True)
        _mount("--no-canonicalize", "--bind", f"/proc/{os.getpid()}/fd/{kept}", str(venv))
    os.close(kept)
    print(READY, flush=True)
    sys.stdin.read()  # until the Airflow side closes the pipe or ends the holder


if __name__ == "__main__":
    _hold([Path(p) for p in sys.argv[1:]])
