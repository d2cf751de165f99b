"""Which Spark Connect session a try works in, kept where the task's next try finds it.

A try's Spark work runs in the Connect server, in a session the worker opened. When the worker dies (a
SIGKILL, a lost Celery worker), the session and its running queries stay in the server until the
session times out, and the next try would compute the same partitions a second time beside them. So
each try records its session (server, session id, try number) in Airflow's ``task_state_store``, the
store ``ResumableJobMixin`` keeps a job id in across tries (scoped to the task instance, whatever its
try), and a new try first joins the previous try's session (a Connect client may name the session id)
and interrupts everything still running there, then releases it. Fencing already keeps the dead try from
committing; this keeps two computations of one partition from running at once.
"""

from __future__ import annotations

import reprlib
import uuid
from dataclasses import dataclass

from airflow_ft_provider.execution.task_state import TaskStateStore, read_record

SESSION_KEY = "ft_connect_session"


@dataclass(frozen=True)
class TrySession:
    """The Connect session one try of a task works in."""

    server: str  # sc://host:port, no credentials
    session_id: str  # a UUID (the form Spark Connect accepts)
    try_number: int

    @classmethod
    def new(cls, server: str, try_number: int) -> TrySession:
        return cls(server, str(uuid.uuid4()), try_number)

    def to_json(self) -> dict[str, object]:
        return {"server": self.server, "session_id": self.session_id, "try_number": self.try_number}

    @classmethod
    def from_json(cls, value: object) -> TrySession:
        """A stored record, validated (ValueError: not one of ours, or damaged)."""
        if not isinstance(value, dict):
            raise ValueError(f"expected an object, got {reprlib.repr(value)}")
        server, session_id, try_number = value.get("server"), value.get("session_id"), value.get("try_number")
        if not isinstance(server, str) or not server.startswith("sc://"):
            raise ValueError(f"'server' must be an sc:// address, got {reprlib.repr(server)}")
        if not isinstance(session_id, str) or str(uuid.UUID(session_id)) != session_id:
            raise ValueError(f"'session_id' must be a UUID, got {reprlib.repr(session_id)}")
        if isinstance(try_number, bool) or not isinstance(try_number, int) or try_number < 0:
            raise ValueError(f"'try_number' must be a count, got {reprlib.repr(try_number)}")
        return cls(server, session_id, try_number)


def with_session_id(url: str, session_id: str) -> str:
    """The connection string ``url`` (``sc://host:port[/][;param=value...]``, as the Spark provider's
    ``SparkConnectHook`` makes it) naming ``session_id``."""
    base, sep, params = url.partition("/;")
    kept = [p for p in params.split(";") if p and not p.startswith("session_id=")] if sep else []
    return f"{base.rstrip('/')}/;" + ";".join([*kept, f"session_id={session_id}"])


def previous_session(store: TaskStateStore | None) -> tuple[TrySession | None, str | None]:
    """The session an earlier try recorded (None if none), and why a record was passed over."""
    return read_record(
        store,
        SESSION_KEY,
        TrySession.from_json,
        record="a session record",
        unread="; no earlier try's work stopped",
    )
