"""A new try waits for the operations an earlier try left running in its Spark Connect session.

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

from airflow_ft_provider.execution.connect_sessions import TrySession, with_session_id
from airflow_ft_provider.execution.contracts import TaskLog

POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Waited:
    ended: bool  # no operation of the session runs any more (False: could not tell, see ``why``)
    seconds: float  # spent waiting
    why: str = ""


def wait_for_operations(url: str, earlier: TrySession, *, log: TaskLog, poll: float = POLL_SECONDS) -> Waited:
    """Join ``earlier``'s session on the server of ``url`` (the connection, with its credentials), wait
    until none of its operations runs, then release the session."""
    from airflow_ft_provider.execution.connect import quiet_abandoned_releases

    started = time.monotonic()
    quiet_abandoned_releases()
    from pyspark.sql.connect import proto
    from pyspark.sql.connect.session import SparkSession

    running = proto.GetStatusResponse.OperationStatus.OPERATION_STATE_RUNNING
    try:
        session = SparkSession.builder.remote(with_session_id(url, earlier.session_id)).create()
    except Exception as err:  # noqa: BLE001 - no session: nothing of it runs
        return Waited(False, 0.0, _first_line(err))
    try:
        ask = getattr(session.client, "_get_operation_statuses", None)
        if ask is None:
            return Waited(False, 0.0, "this PySpark cannot ask the server for an operation's state")
        said = False
        while True:
            try:
                states = [status.state for status in ask().operation_statuses]
            except Exception as err:  # noqa: BLE001 - a session gone, or a server that does not answer
                return Waited(False, time.monotonic() - started, _first_line(err))
            if running not in states:
                return Waited(True, time.monotonic() - started)
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
            session.interruptAll()  # a terminating execution still holds its results: free them
            session.stop()
        except Exception as err:  # noqa: BLE001 - the server frees an abandoned session itself
            log.info("could not release try %d's session (%s)", earlier.try_number, _first_line(err))


def _first_line(err: BaseException) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0][:200]
