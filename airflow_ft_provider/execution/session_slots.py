"""Warm Spark Connect sessions, handed from one stage try to the next on the same machine.

Spark starts the Python processes of a Connect session afresh for every session (they are keyed by
the session's artifact UUID), so the first Python step of a fresh session (the executors' reads and
writes, a UDF) costs seconds: ~2.7 s for a stage's read and write measured against 0.4 s in a session
that ran one before (bench/bench_data_path.py). A try therefore takes a *slot*: one of this machine's
sessions on that server, held under an exclusive ``flock`` for the try's life (the lock goes with the
process, however it ends), and works in the slot's session.

A session is handed on only as it was found, and only after a clean end:

* **Clean end** (the try's Spark work ended and it reset the session: its conf back to what it found,
  its temporary views dropped): the slot is marked clean and the session stays open on the server for
  the next try.
* **Any other end** (an error, a kill, a lost process): the slot stays marked in use, so the next try
  that takes it opens a new session (the slot's generation moves on) and never shares one in which an
  earlier try's operations may still run. That session stays the earlier try's, for its next try to
  wait for or interrupt (``connect_sessions.py``).
* **Other code, other session**: a session's id names its slot, its generation and a digest of the
  modules the try ships to it (this package's Spark-side modules, the stage's ``py_files``), because a
  Python worker keeps the modules it imported: changed code gets a session of its own.

A server that closed a session (idle timeout, restart) answers ``SESSION_CLOSED``; the slot then moves
to its next generation (``retire``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import tempfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_ft_provider.execution.connect_sessions import with_session_id
from airflow_ft_provider.task_log import TaskLog

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

SLOTS_PER_SERVER = 256  # more tries at once on one machine than this open fresh sessions
_NAMESPACE = uuid.UUID("6a0d5b1e-2f44-4f4c-9d7e-7f3c1c0a9b21")


def code_digest(files: Iterable[Path]) -> str:
    """What the sessions of one code have in common: the shipped files' names and contents."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@dataclass
class SlotLease:
    """One slot, held by this process until ``release``: the session id to work in."""

    index: int
    generation: int
    session_id: str
    state_file: Path
    lock_fd: int


class SessionSlots:
    """This machine's slots for one Spark Connect server (``sc://host:port``) and one code digest."""

    def __init__(self, server: str, digest: str, root: Path | None = None) -> None:
        self.server = server
        self.digest = digest
        base = root or Path(tempfile.gettempdir()) / "airflow-ft-sessions"
        self.folder = base / hashlib.sha256(server.encode()).hexdigest()[:16]

    def acquire(self) -> SlotLease | None:
        """The first free slot, locked and marked in use; None when every slot is taken."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for index in range(SLOTS_PER_SERVER):
            fd = os.open(self.folder / f"slot-{index}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            state_file = self.folder / f"slot-{index}.json"
            generation, clean = _read_state(state_file)
            if not clean:  # its last try did not end cleanly: its session is not handed on
                generation += 1
            lease = SlotLease(index, generation, self._session_id(index, generation), state_file, fd)
            _write_state(state_file, generation, clean=False)
            return lease
        return None

    def retire(self, lease: SlotLease) -> None:
        """The server closed the lease's session: the slot moves to a new one."""
        lease.generation += 1
        lease.session_id = self._session_id(lease.index, lease.generation)
        _write_state(lease.state_file, lease.generation, clean=False)

    def release(self, lease: SlotLease, *, clean: bool) -> None:
        """Give the slot up; ``clean``: its session may serve the next try."""
        try:
            if clean:
                _write_state(lease.state_file, lease.generation, clean=True)
        finally:
            os.close(lease.lock_fd)  # the lock goes with it

    def _session_id(self, index: int, generation: int) -> str:
        name = f"{socket.gethostname()}|{self.server}|{self.digest}|{index}|{generation}"
        return str(uuid.uuid5(_NAMESPACE, name))


def join_slot(
    url: str, slots: SessionSlots, lease: SlotLease | None, log: TaskLog
) -> tuple[ConnectSession, dict[str, str]]:
    """A client of the lease's session (of a new session without a lease) and the session's conf as
    found. A session the server closed moves the slot on once."""
    from pyspark.sql.connect.session import SparkSession

    for attempt in (1, 2):
        session_id = lease.session_id if lease is not None else str(uuid.uuid4())
        session = SparkSession.builder.remote(with_session_id(url, session_id)).create()
        try:
            return session, dict(session.conf.getAll)  # the first call: the server knows it, or not
        except Exception as err:
            session.release_session_on_close = False
            session.stop()  # closes the client: one left open calls the server again at exit
            if lease is None or attempt == 2 or "SESSION_CLOSED" not in str(err):
                raise
            log.info("Spark Connect closed slot %d's session; opening a new one", lease.index)
            slots.retire(lease)
    raise AssertionError("unreachable")


def reset(session: ConnectSession, found_conf: dict[str, str]) -> None:
    """Put the session back as a try found it: its conf (keys the try set or changed), and none of the
    temporary views the try made (global ones, the engine's pipelined partitions, stay)."""
    now = dict(session.conf.getAll)
    for key in now.keys() - found_conf.keys():
        session.conf.unset(key)
    for key, value in found_conf.items():
        if now.get(key) != value:
            session.conf.set(key, value)
    for table in session.catalog.listTables():
        if table.isTemporary and not table.namespace:
            session.catalog.dropTempView(table.name)


def _read_state(path: Path) -> tuple[int, bool]:
    """(generation, clean) of a slot. A missing or damaged file (a cleaned temp dir) says nothing of
    the sessions the server may still hold for the slot, so it starts a generation no one used."""
    unknown = (int.from_bytes(os.urandom(6), "big"), False)
    try:
        state = json.loads(path.read_text())
        generation, clean = state["generation"], state["clean"]
    except (OSError, ValueError, KeyError, TypeError):
        return unknown
    if isinstance(generation, bool) or not isinstance(generation, int) or not isinstance(clean, bool):
        return unknown
    return generation, clean


def _write_state(path: Path, generation: int, *, clean: bool) -> None:
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({"generation": generation, "clean": clean}))
    os.replace(partial, path)
