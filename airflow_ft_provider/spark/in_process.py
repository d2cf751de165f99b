"""A stage whose application runs in this process (Spark Connect: the application is a function the
Airflow worker calls), as the stage's ``StageIO`` records what it wrote for the operator to read back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .spec import StageSpec, StoreCredentials


@dataclass
class InProcessStage:
    """A stage whose application runs in this process: its spec, and the rows of each output written."""

    spec: StageSpec
    fail_before_write: bool = False
    rows: dict[str, int] = field(default_factory=dict)
    contents: dict[str, str | None] = field(default_factory=dict)  # each output's row checksum, if any
    streams: dict[str, dict[str, object]] = field(default_factory=dict)  # a checkpointed output's progress
    credentials: StoreCredentials | None = field(default=None, repr=False)  # for the executors (if any)
