"""PySpark's Spark Connect client logs, as a stage try's task log should show them."""

from __future__ import annotations

import logging


class AbandonedReleases(logging.Filter):
    """Drops PySpark's warning about a ReleaseExecute RPC that was still in flight when the try stopped
    its session (``SESSION_CLOSED``). The server frees abandoned executions itself (as PySpark's own
    code says), so the warning -- several per stage, at error level in the task log -- is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("ReleaseExecute failed" in message and "SESSION_CLOSED" in message)


CLIENT_LOGGER = "pyspark.sql.connect.logging"


def quiet_abandoned_releases() -> None:
    """Install :class:`AbandonedReleases` on PySpark's Connect logger, once. Called after PySpark made
    that logger (a PySparkLogger): creating it first here would give PySpark a plain one."""
    import pyspark.sql.connect.logging  # noqa: F401

    logger = logging.getLogger(CLIENT_LOGGER)
    if not any(isinstance(f, AbandonedReleases) for f in logger.filters):
        logger.addFilter(AbandonedReleases())
