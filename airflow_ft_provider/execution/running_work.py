"""A try's Spark Connect work in flight, recorded where the task's next try finds it.

On Spark Connect a stage's long operation (its write) runs in the server, not in the worker. When the
worker dies mid-write, the server goes on with it: it keeps an execution whose client went away until
``spark.connect.execute.manager.detachedTimeout``. So just before the application runs, a try records
the session it works in, where each output is staged and which input attempts it read, in Airflow's
``task_state_store``. The task's next try then waits for that session's operations to end and commits
the output they completed, instead of computing it a second time beside them (``stage_try/adoption.py``,
``execution/connect_operations.py``). An output is staged (``file://``, under the try's scratch
directory: adoptable on the same machine only) or an attempt the executors write in S3 (``s3://`` with
its attempt id: adoptable from any worker, complete once the driver wrote the executors' record).
"""

from __future__ import annotations

import os
import reprlib
from dataclasses import dataclass, field

from airflow_ft_provider.execution.connect_sessions import TrySession
from airflow_ft_provider.execution.finished_work import lineage_and_inputs
from airflow_ft_provider.execution.task_state import TaskStateStore, as_object, as_text, read_record
from airflow_ft_provider.execution.workdir import PREFIX
from airflow_ft_provider.partitions.naming import check_name

RUNNING_KEY = "ft_running_work"


@dataclass(frozen=True)
class RunningWork:
    session: TrySession  # the server, session id and try number
    host: str  # where the staging directories are
    workdir: str  # the try's scratch directory, kept by sweeps while it may be adopted
    inputs: dict[str, str]  # partition id -> the attempt id of the manifest read
    lineage: str | None
    outputs: dict[str, str]  # result -> its file:// staging directory, or its s3:// attempt prefix
    attempts: dict[str, str] = field(default_factory=dict)  # result -> attempt id, for s3:// outputs

    @property
    def staged(self) -> bool:
        """Whether the outputs are on the recording worker's disk (else in S3, seen from any worker)."""
        return any(location.startswith("file://") for location in self.outputs.values())

    @property
    def try_number(self) -> int:
        return self.session.try_number

    def to_json(self) -> dict[str, object]:
        return {
            "session": self.session.to_json(),
            "host": self.host,
            "workdir": self.workdir,
            "inputs": dict(self.inputs),
            "lineage": self.lineage,
            "outputs": dict(self.outputs),
            **({"attempts": dict(self.attempts)} if self.attempts else {}),
        }

    @classmethod
    def from_json(cls, value: object) -> RunningWork:
        """A stored record, validated (ValueError: not one of ours, or damaged)."""
        doc = as_object(value, "the record")
        workdir = as_text(doc.get("workdir"), "workdir")
        if workdir != os.path.normpath(workdir) or not os.path.isabs(workdir) or not _is_scratch(workdir):
            raise ValueError(f"'workdir' must be a try's scratch directory, got {reprlib.repr(workdir)}")
        outputs = {}
        attempts = {
            str(name): check_name("attempt id", raw)
            for name, raw in as_object(doc.get("attempts", {}), "'attempts'").items()
        }
        for name, raw in as_object(doc.get("outputs"), "'outputs'").items():
            location = as_text(raw, "location")
            inside = os.path.normpath(location.removeprefix("file://"))
            in_s3 = location.startswith("s3://") and name in attempts
            if not in_s3 and (not location.startswith("file://") or not inside.startswith(workdir + "/")):
                raise ValueError(
                    f"output {name!r} must be staged (file://) under {workdir!r} or an s3:// attempt "
                    f"with its attempt id, got {reprlib.repr(location)}"
                )
            outputs[str(name)] = location
        if set(attempts) - set(outputs):
            raise ValueError(f"'attempts' names outputs the record does not have: {sorted(attempts)}")
        if len({loc.startswith("file://") for loc in outputs.values()}) > 1:
            raise ValueError("the outputs must be all staged or all in S3")
        lineage, inputs = lineage_and_inputs(doc)
        return cls(
            TrySession.from_json(doc.get("session")),
            as_text(doc.get("host"), "host"),
            workdir,
            inputs,
            lineage,
            outputs,
            attempts,
        )


def _is_scratch(path: str) -> bool:
    return os.path.basename(path).startswith(PREFIX)


def earlier_running_work(
    store: TaskStateStore | None, try_number: int
) -> tuple[RunningWork | None, str | None]:
    """What an earlier try of this task had running when it last recorded (None if nothing), and why a
    record was passed over."""
    work, passed_over = read_record(
        store, RUNNING_KEY, RunningWork.from_json, record="a running-work record", unread=""
    )
    return (work, passed_over) if work is None or work.try_number < try_number else (None, None)
