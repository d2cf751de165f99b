"""What a try reports of each partition it committed (its ``ft_partitions`` XCom), however it came by
the data: computed, reused, adopted from a killed try, or kept as a view by the Spark Connect server."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from airflow_ft_provider.partitions import Manifest

PARTITIONS_XCOM_KEY = "ft_partitions"
_ALWAYS = ("type", "rows", "files", "bytes", "attempt", "execution")  # the rest only when set


@dataclass(frozen=True)
class PartitionEntry:
    type: str  # the result type: "blocking" or "pipelined"
    rows: int | None
    files: int
    bytes: int
    attempt: str | None  # the committed attempt (None: a view in the Spark Connect server)
    execution: str | None = None  # a pipelined partition: the execution of its region
    view: str | None = None
    reused_from_try: int | None = None
    reused_from_run: str | None = None
    adopted_from_try: int | None = None
    checkpoint: Mapping[str, object] | None = None  # a checkpointed try's summary

    @classmethod
    def committed(
        cls,
        manifest: Manifest,
        rows: int | None,
        *,
        execution: str | None = None,
        reused_from_try: int | None = None,
        reused_from_run: str | None = None,
        adopted_from_try: int | None = None,
    ) -> PartitionEntry:
        """The entry of a partition committed to the store (``manifest``)."""
        return cls(
            manifest.kind,
            rows,
            len(manifest.files),
            manifest.total_size,
            manifest.attempt_id,
            execution,
            reused_from_try=reused_from_try,
            reused_from_run=reused_from_run,
            adopted_from_try=adopted_from_try,
        )

    def with_checkpoint(self, summary: Mapping[str, object]) -> PartitionEntry:
        return replace(self, checkpoint=summary)

    def to_xcom(self) -> dict[str, object]:
        return {
            f.name: value
            for f in fields(self)
            if (value := getattr(self, f.name)) is not None or f.name in _ALWAYS
        }


Committed = dict[str, PartitionEntry]  # partition id -> what was committed


def as_xcom(committed: Committed) -> dict[str, dict[str, object]]:
    return {partition_id: entry.to_xcom() for partition_id, entry in committed.items()}
