"""A try's finished Spark work, recorded where the task's next try finds it.

Between the end of a try's Spark work and the end of its commit, the try holds a complete result that
nobody can read yet. When the worker dies in that window (a SIGKILL, a lost Celery worker, the OOM
killer), the next try would compute it again. So the moment the application has written every output,
the try records where they are, how many rows each has and what they hold, and which input attempts it
read, in Airflow's ``task_state_store`` (the store ``ResumableJobMixin`` keeps a job id in, scoped to
the task instance across its tries). The next try commits that output itself when it is still there and
its inputs are the same attempts (``stage_try/adoption.py``), without starting Spark.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass

from airflow_ft_provider.execution.task_state import (
    TaskStateStore,
    as_count,
    as_object,
    as_optional_text,
    as_text,
    read_record,
)
from airflow_ft_provider.partitions.provenance import CONTENT, LINEAGE

FINISHED_KEY = "ft_finished_work"


@dataclass(frozen=True)
class FinishedOutput:
    """One output the application wrote: a ``file://`` staging directory or an ``s3a://`` attempt."""

    location: str
    attempt: str | None  # an S3 placement: the attempt id Spark wrote under
    rows: int
    content: str | None


@dataclass(frozen=True)
class FinishedWork:
    try_number: int
    host: str  # where a file:// location is
    workdir: str | None  # the try's scratch directory (staged outputs), removed once adopted
    inputs: dict[str, str]  # partition id -> the attempt id of the manifest read
    lineage: str | None
    outputs: dict[str, FinishedOutput]  # result -> where it is

    def to_json(self) -> dict[str, object]:
        return {
            "try_number": self.try_number,
            "host": self.host,
            "workdir": self.workdir,
            "inputs": dict(self.inputs),
            "lineage": self.lineage,
            "outputs": {
                name: {"location": o.location, "attempt": o.attempt, "rows": o.rows, "content": o.content}
                for name, o in self.outputs.items()
            },
        }

    @classmethod
    def from_json(cls, value: object) -> FinishedWork:
        """A stored record, validated (ValueError: not one of ours, or damaged)."""
        doc = as_object(value, "the record")
        outputs = {}
        for name, raw in as_object(doc.get("outputs"), "'outputs'").items():
            out = as_object(raw, f"output {name!r}")
            location = as_text(out.get("location"), "location")
            if not location.startswith(("file://", "s3a://", "s3://")):
                raise ValueError(f"'location' must be file://, s3:// or s3a://, got {reprlib.repr(location)}")
            content = as_optional_text(out.get("content"), "content")
            if content is not None and not CONTENT.match(content):
                raise ValueError(f"'content' is not a row checksum: {reprlib.repr(content)}")
            outputs[str(name)] = FinishedOutput(
                location,
                as_optional_text(out.get("attempt"), "attempt"),
                as_count(out.get("rows"), "rows"),
                content,
            )
        lineage, inputs = lineage_and_inputs(doc)
        return cls(
            as_count(doc.get("try_number"), "try_number"),
            as_text(doc.get("host"), "host"),
            as_optional_text(doc.get("workdir"), "workdir"),
            inputs,
            lineage,
            outputs,
        )


def lineage_and_inputs(doc: dict[str, object]) -> tuple[str | None, dict[str, str]]:
    """A record's ``lineage`` and ``inputs`` (partition id -> attempt id read), validated."""
    lineage = as_optional_text(doc.get("lineage"), "lineage")
    if lineage is not None and not LINEAGE.match(lineage):
        raise ValueError(f"'lineage' is not a lineage digest: {reprlib.repr(lineage)}")
    raw_inputs = as_object(doc.get("inputs"), "'inputs'")
    inputs = {str(k): as_text(v, "input attempt") for k, v in raw_inputs.items()}
    return lineage, inputs


def earlier_finished_work(
    store: TaskStateStore | None, try_number: int
) -> tuple[FinishedWork | None, str | None]:
    """What an earlier try of this task finished and did not commit (None if nothing), and why a record
    was passed over."""
    work, passed_over = read_record(
        store, FINISHED_KEY, FinishedWork.from_json, record="a finished-work record", unread=""
    )
    return (work, passed_over) if work is None or work.try_number < try_number else (None, None)
