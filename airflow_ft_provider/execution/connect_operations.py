"""What a new try does with the operations an earlier try left in its Spark Connect session: wait for
them (``wait_for_operations``), or interrupt them (``release``), after joining it (``join``).

A Connect client may join a session by id, and the server answers ``GetStatus`` for a session's
operations (running, terminating, succeeded, failed, cancelled). PySpark 4.3 asks it only through its
client's ``_get_operation_statuses``, not a public method: where that is missing or the server does not
answer, the wait reports that it could not tell, and the caller interrupts the work instead of waiting.
Waiting is bounded by the server itself: it removes an execution nobody reattached to after
``spark.connect.execute.manager.detachedTimeout`` (5 minutes by default), which ends the wait.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_ft_provider.execution.connect_sessions import TrySession, with_session_id
from airflow_ft_provider.task_log import TaskLog

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Waited:
    saw_running: bool  # an operation of the session was running, and was waited for
    seconds: float  # spent joining and waiting
    why: str = ""  # why the state could not be told ("": it could)


def join(url: str, earlier: TrySession) -> ConnectSession:
    """A client of ``earlier``'s session on the server of ``url`` (the connection, with its
    credentials); raises when the server no longer has that session."""
    from pyspark.sql.connect.session import SparkSession

    return SparkSession.builder.remote(with_session_id(url, earlier.session_id)).create()


def release(session: ConnectSession) -> list[str]:
    """Interrupt what still runs in ``session`` (a terminating execution still holds its results too),
    then release the session; the operations interrupted."""
    try:
        return list(session.interruptAll())
    finally:
        session.stop()


def wait_for_operations(url: str, earlier: TrySession, *, log: TaskLog, poll: float = POLL_SECONDS) -> Waited:
    """Join ``earlier``'s session, wait until none of its operations runs, then release the session."""
    from pyspark.sql.connect import proto

    started, said = time.monotonic(), False
    running = proto.GetStatusResponse.OperationStatus.OPERATION_STATE_RUNNING
    try:
        session = join(url, earlier)
    except Exception as err:  # noqa: BLE001 - no session: nothing of it runs
        return Waited(False, time.monotonic() - started, first_line(err))
    try:
        ask = getattr(session.client, "_get_operation_statuses", None)
        if ask is None:
            return Waited(False, 0.0, "this PySpark cannot ask the server for an operation's state")
        while True:
            try:
                states = [status.state for status in ask().operation_statuses]
            except Exception as err:  # noqa: BLE001 - a session gone, or a server that does not answer
                return Waited(said, time.monotonic() - started, first_line(err))
            if running not in states:
                return Waited(said, time.monotonic() - started)
            if not said:
                said = True
                log.info(
                    "try %d's Spark work still runs in its Spark Connect session %s: waiting for it to "
                    "end instead of computing the same output beside it",
                    earlier.try_number,
                    earlier.session_id,
                )
            time.sleep(poll)
    finally:
        try:
            release(session)
        except Exception as err:  # noqa: BLE001 - the server frees an abandoned session itself
            log.info("could not release try %d's session (%s)", earlier.try_number, first_line(err))


def first_line(err: BaseException) -> str:
    """An error's first line, short enough for a log line."""
    return (str(err).splitlines() or [type(err).__name__])[0][:200]
