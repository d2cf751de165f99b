"""A throw-away Redis server: the Celery broker of the reference deployment
(:mod:`ft_harness.airflow.deployment`).

Debian's ``redis-server`` (``scripts/cluster.sh`` installs it when missing), on 127.0.0.1 and a free
port, with its working directory in a temporary folder. It keeps an append-only file, synced on every
write, as a production broker must: a Redis that crashes and starts again (:meth:`RedisServer.kill`, then
:meth:`RedisServer.start`) still holds the tasks that were waiting in its queues. Without it a queued
task is lost and Airflow finds it only after ``[scheduler] task_queued_timeout`` (10 minutes by default).
Stopped (and its folder removed) at the end.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class RedisUnavailable(RuntimeError):
    """No ``redis-server`` on this machine (``apt-get install redis-server``)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """``with RedisServer() as redis: broker = redis.url(0)``."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RedisUnavailable(
                "redis-server not found on PATH: install Debian's redis-server package "
                "(scripts/cluster.sh does so as root)"
            )
        self.binary = binary
        self.port = _free_port()
        self.dir: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, database: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 30.0) -> RedisServer:
        """Start the server (again, after :meth:`kill`: same port, same folder, its queues replayed)."""
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="ft-redis-"))
        argv = [
            self.binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--protected-mode",
            "yes",
            "--logfile",
            str(self.dir / "redis.log"),
        ]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.log_tail()
                self.stop()
                raise RuntimeError(f"Redis did not answer PING on port {self.port}:\n{log}")
            time.sleep(0.1)
        return self

    def _answers(self) -> bool:
        try:
            return self.command("PING") == "PONG"
        except OSError:
            return False

    def command(self, *words: str) -> str | int:
        """One command, its simple answer (a status or an integer): e.g. ``command("LLEN", "default")``."""
        request = f"*{len(words)}\r\n" + "".join(f"${len(w.encode())}\r\n{w}\r\n" for w in words)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(request.encode())
            line = s.makefile("rb").readline().decode().rstrip("\r\n")
        kind, value = line[:1], line[1:]
        if kind == "-":
            raise RuntimeError(f"Redis answered {words[0]} with an error: {value}")
        return int(value) if kind == ":" else value

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; its folder (the append-only file) stays for :meth:`start`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join((self.dir / "redis.log").read_text(errors="replace").splitlines()[-lines:])
        except (OSError, TypeError):
            return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
