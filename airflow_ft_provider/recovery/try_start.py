"""What the start of a stage try learns from region failover: go on, wait, or do nothing at all."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Proceed:
    """Run the stage now."""


@dataclass(frozen=True)
class WaitUntil:
    """The try's region restarts at ``at`` (seconds since the epoch): wait (deferred), then run. A try
    that must first finish a restart the REST API could not carry out waits too, and looks again."""

    at: float
    reason: str = "restart strategy backoff"


@dataclass(frozen=True)
class Superseded:
    """This try was cleared because producers it reads from restart first: do no work; Airflow
    schedules the task again once they have run."""

    reason: str


TryStart = Proceed | WaitUntil | Superseded
