"""A throw-away PostgreSQL server for the live test Airflow's metadata database.

Airflow's production backend, started from Debian's ``postgresql`` package (``scripts/test.sh``
installs it when missing) in a temporary data directory on a free port, and removed at the end. SQLite,
the fallback of :class:`~ft_harness.airflow.live_airflow.LiveAirflow`, answers "database is locked" under the
suite's load and Airflow then records a successful try as failed.

PostgreSQL refuses to run as root: as root, the server runs as the ``postgres`` account the package
creates. Durability settings are off (``fsync``, ``synchronous_commit``, ``full_page_writes``): the data
lives as long as the test session and a crash loses nothing anyone needs.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SUPERUSER = "airflow"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine (``apt-get install postgresql``)."""


def server_binaries() -> Path:
    """The ``bin`` directory of the newest installed PostgreSQL (Debian keeps it off ``PATH``)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    raise PostgresUnavailable(
        "PostgreSQL server binaries not found (looked in /usr/lib/postgresql/*/bin and on PATH): "
        "install Debian's postgresql package (scripts/test.sh does so as root)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """``with PostgresServer() as pg: url = pg.create_database("x")``."""

    def __init__(self, max_connections: int = 300):
        self.bin = server_binaries()
        self.max_connections = max_connections
        self.port = _free_port()
        self.data_dir: Path | None = None
        self.log_path: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        # As root, run as the package's postgres account (initdb and postgres refuse root).
        self._account = pwd.getpwnam("postgres") if os.geteuid() == 0 else None

    def _as_owner(self) -> dict:
        if self._account is None:
            return {}
        return {"user": self._account.pw_uid, "group": self._account.pw_gid, "extra_groups": []}

    def start(self, timeout: float = 60.0) -> PostgresServer:
        """Start the server: a new cluster the first time; after :meth:`shut_down`, the same one again."""
        if self.data_dir is None:
            self._init_cluster()
        return self._launch(timeout)

    def _init_cluster(self) -> None:
        # Directly under /tmp when running as root: the session's own temp directories (and maybe
        # $TMPDIR) are 0700 root, which the postgres account could not enter.
        root = Path(
            tempfile.mkdtemp(prefix="ft-postgres-", dir="/tmp" if self._account is not None else None)
        )
        self.data_dir, self.log_path = root / "data", root / "server.log"
        if self._account is not None:
            os.chown(root, self._account.pw_uid, self._account.pw_gid)
        subprocess.run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                SUPERUSER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
            check=True,
            capture_output=True,
            **self._as_owner(),
        )

    def _launch(self, timeout: float) -> PostgresServer:
        assert self.data_dir is not None and self.log_path is not None
        root = self.data_dir.parent
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(root),
            "max_connections": str(self.max_connections),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }
        argv = [str(self.bin / "postgres"), "-D", str(self.data_dir)]
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        with open(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), "ab") as log:
            if self._account is not None:
                os.chown(self.log_path, self._account.pw_uid, self._account.pw_gid)
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **self._as_owner()
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited with {self.proc.returncode}:\n{self.log_tail()}")
            if (
                subprocess.run(
                    [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)], check=False
                ).returncode
                == 0
            ):
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"PostgreSQL did not accept connections in {timeout:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def url(self, database: str = "postgres", driver: str = "psycopg2") -> str:
        return f"postgresql+{driver}://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; returns its SQLAlchemy URL (psycopg2, as Airflow's sync engine uses)."""
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, dbname="postgres")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.url(name)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except (OSError, AttributeError):
            return "(no log)"

    def shut_down(self) -> None:
        """Stop the server as an operator's restart does (a fast shutdown: sessions are ended, the
        transactions in flight rolled back); :meth:`start` brings the same databases back."""
        self._shut_down_server()

    def stop(self) -> None:
        self._shut_down_server()
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir.parent, ignore_errors=True)
            self.data_dir = None

    def _shut_down_server(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown (SIGTERM's "smart" one waits for clients)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGQUIT)  # immediate shutdown
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
