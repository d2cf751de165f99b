"""A try's checkpoint statistics (seed 003's monitoring), whichever path took the checkpoints: the
staged path's uploader (``uploader.CheckpointStats``) and the executors' micro-batch listing
(``stream_stats.StreamStats``) both report them in this one form, which the metrics, the run's history
and the try's XCom read."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class TryCheckpoints:
    completed: int
    failed: int = 0
    failures: list[str] = field(default_factory=list)  # the reasons, newest last
    processed_bytes: int | None = None  # of the input, by the last completed checkpoint
    total_bytes: int | None = None
    last_completed: int | None = None
    last_duration: float | None = None  # seconds
    last_size: int | None = None
    last_incremental_size: int | None = None
    uploaded_bytes: int = 0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
