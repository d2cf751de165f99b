"""A stage's task log keeps PySpark's Connect warnings, except the one about releases abandoned when the
try stops its session (harmless: the server frees them; several per stage, shown at error level)."""

from __future__ import annotations

import logging

from airflow_ft_provider.execution.connect_logs import CLIENT_LOGGER, quiet_abandoned_releases


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_only_the_abandoned_release_warning_is_dropped():
    quiet_abandoned_releases()  # as ConnectBackend.open does
    quiet_abandoned_releases()  # idempotent
    logger, seen = logging.getLogger(CLIENT_LOGGER), Collect()
    assert type(logger).__name__ == "PySparkLogger" and len(logger.filters) == 1
    logger.addHandler(seen)
    disabled, level = logger.disabled, logger.level
    logger.disabled, logger.level = False, logging.WARNING
    try:
        logger.warning(
            'ReleaseExecute failed with exception: <_InactiveRpcError ... details = "[INVALID_HANDLE.'
            'SESSION_CLOSED] The handle 539a is invalid. Session was closed. SQLSTATE: 08003" >.'
        )
        logger.warning(
            "ReleaseExecute failed with exception: <_InactiveRpcError ... UNAVAILABLE: connection refused>."
        )
        logger.warning("Retrying ExecutePlan after a transient error")
    finally:
        logger.removeHandler(seen)
        logger.disabled, logger.level = disabled, level
    assert seen.messages == [
        "ReleaseExecute failed with exception: <_InactiveRpcError ... UNAVAILABLE: connection refused>.",
        "Retrying ExecutePlan after a transient error",
    ]
