"""What a run asks of fault injection, and what a try does when it asks nothing (shared by the seam
in ``faults/__init__.py`` and the implementation in ``faults/injection.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from airflow.sdk import Context

FAULTS_KEY = "ft_faults"
ALLOW_KEY = "allow_fault_injection"
MODES = ("raise", "app", "kill", "batch", "none")


class TryFaults(Protocol):
    """The two points a stage try offers to fault injection, and whether the application fails."""

    @property
    def fails_in_app(self) -> bool: ...

    @property
    def fail_in_batch(self) -> int | None: ...

    def before_work(self) -> None: ...

    def after_work(self) -> None: ...


class NoFaults:
    """What a stage try does about faults in the normal case: nothing."""

    fails_in_app = False
    fail_in_batch = None

    def before_work(self) -> None:
        pass

    def after_work(self) -> None:
        pass


NO_FAULTS = NoFaults()


def requested_faults(context: Context) -> object:
    """What the run's conf (or the DAG's params) asks for under ``ft_faults``."""
    conf = (context.get("dag_run") and context["dag_run"].conf) or {}
    return conf.get(FAULTS_KEY, (context.get("params") or {}).get(FAULTS_KEY, []))
