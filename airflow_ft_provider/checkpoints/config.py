"""Flink's checkpoint keys, their meaning here, and the ones that have none (refused with the reason).

    execution.checkpointing.interval             time between completed checkpoints (target)   1 min
    execution.checkpointing.interval-volume      input per micro-batch at most                 128 mb
    execution.checkpointing.min-pause            least time from one checkpoint to the next    0 ms
    execution.checkpointing.timeout              a checkpoint's upload longer than this fails  10 min
    execution.checkpointing.tolerable-failed-checkpoints   failed checkpoints a try survives   0
    execution.checkpointing.snapshot-compression compress the uploaded checkpoint              false
    execution.checkpointing.incremental          RocksDB changelog checkpointing               false
    state.checkpoints.num-retained               completed checkpoints kept in the store       1
    state.backend.local-recovery                 a retry on the same worker uses its local copy false

Validated when the DAG is parsed: the key, the value and the fix. ``interval-volume`` is this project's
own: Spark has no barriers, so a micro-batch is bounded by the input it reads, not by time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

from airflow_ft_provider.failover import sizes
from airflow_ft_provider.failover.durations import DURATION_HELP, parse_duration
from airflow_ft_provider.failover.key_hint import unknown_key_hint

PREFIX = "execution.checkpointing."
INTERVAL = PREFIX + "interval"
INTERVAL_VOLUME = PREFIX + "interval-volume"
MIN_PAUSE = PREFIX + "min-pause"
TIMEOUT = PREFIX + "timeout"
TOLERABLE_FAILED = PREFIX + "tolerable-failed-checkpoints"
COMPRESSION = PREFIX + "snapshot-compression"
INCREMENTAL = PREFIX + "incremental"
NUM_RETAINED = "state.checkpoints.num-retained"
LOCAL_RECOVERY = "state.backend.local-recovery"

REFUSED = {
    PREFIX
    + "unaligned": "Spark has no checkpoint barriers to overtake; under backpressure micro-batches are "
    f"bounded by volume and shrink when one overruns the interval: set {INTERVAL_VOLUME} instead",
    PREFIX + "unaligned.enabled": f"as for {PREFIX}unaligned: set {INTERVAL_VOLUME} instead",
    PREFIX
    + "aligned-checkpoint-timeout": f"there is no alignment to time out: set {INTERVAL_VOLUME} instead",
    PREFIX + "max-concurrent-checkpoints": "Spark completes one micro-batch at a time: leave it out",
    PREFIX + "externalized-checkpoint-retention": f"checkpoints live with the run's partitions and are "
    f"released with them; {NUM_RETAINED} bounds them while the stage runs",
}
MODE = PREFIX + "mode"
# Keys that act on the staged path's copy of Spark's checkpoint in the store. On the executors' data
# path Spark writes its checkpoint on the Spark side and the store holds the micro-batches' outputs, so
# they have nothing to act on there: given explicitly for such a stage, they are refused (the reason).
STAGED_PATH_ONLY = {
    MIN_PAUSE: "micro-batches follow one another as Spark runs them",
    TIMEOUT: "no checkpoint is uploaded, so none can time out",
    TOLERABLE_FAILED: "no checkpoint is uploaded, so none can fail (a failed micro-batch fails the try)",
    COMPRESSION: "no checkpoint is copied to the store",
    NUM_RETAINED: "Spark keeps its own checkpoint files (spark.sql.streaming.minBatchesToRetain)",
    LOCAL_RECOVERY: "Spark's checkpoint is already on the Spark side, where a retry finds it",
}


class CheckpointConfigError(ValueError):
    """An invalid checkpoint setting: the message names the key, the value and the fix."""


@dataclass(frozen=True)
class CheckpointConfig:
    interval: float = 60.0  # seconds
    interval_volume: int = 128 << 20  # bytes
    min_pause: float = 0.0
    timeout: float = 600.0
    tolerable_failed: int = 0
    snapshot_compression: bool = False
    incremental: bool = False
    num_retained: int = 1
    local_recovery: bool = False

    def as_keys(self) -> dict[str, object]:
        """The settings as Flink keys (stored with the pipeline, shown on the failover page)."""
        return {key: getattr(self, name) for key, name in _FIELD_OF_KEY.items()}


_FIELD_OF_KEY = {
    INTERVAL: "interval",
    INTERVAL_VOLUME: "interval_volume",
    MIN_PAUSE: "min_pause",
    TIMEOUT: "timeout",
    TOLERABLE_FAILED: "tolerable_failed",
    COMPRESSION: "snapshot_compression",
    INCREMENTAL: "incremental",
    NUM_RETAINED: "num_retained",
    LOCAL_RECOVERY: "local_recovery",
}
KNOWN_KEYS = (*_FIELD_OF_KEY, MODE)
DESCRIPTIONS = {
    INTERVAL: "target time between completed checkpoints (micro-batches).",
    INTERVAL_VOLUME: "input one micro-batch reads at most (Flink notation, e.g. 64 mb).",
    MIN_PAUSE: "least time from the end of one checkpoint to the start of the next.",
    TIMEOUT: "a checkpoint taking longer fails.",
    TOLERABLE_FAILED: "failed checkpoints a try tolerates before it fails.",
    COMPRESSION: "compress the checkpoint's copy in the partition store.",
    INCREMENTAL: "RocksDB state store with changelog checkpointing (Spark's incremental checkpoints).",
    NUM_RETAINED: "completed checkpoints kept while the stage runs.",
    LOCAL_RECOVERY: "a retry on the same worker restores from its verified task-local copy.",
    MODE: "EXACTLY_ONCE only (the output is committed once, after the last micro-batch).",
}
assert set(_FIELD_OF_KEY.values()) == {f.name for f in fields(CheckpointConfig)}


def load_checkpoint_config(*layers: Mapping[str, object], source: str = "checkpointing=") -> CheckpointConfig:
    """The checkpoint settings of a stage: later layers override earlier ones key by key (the cluster's
    ``[ft_provider]`` keys, the pipeline's, the stage's). :class:`CheckpointConfigError` otherwise."""
    merged: dict[str, object] = {}
    for layer in layers:
        merged.update(layer)
    values: dict[str, object] = {}
    for key, value in merged.items():
        if key in REFUSED:
            raise CheckpointConfigError(f"{key}={value!r} (in {source}) has no meaning here: {REFUSED[key]}")
        if key == MODE:
            if str(value).strip().upper().replace("-", "_") != "EXACTLY_ONCE":
                raise CheckpointConfigError(
                    f"{MODE}={value!r} (in {source}): a checkpointed stage is exactly-once (its output is "
                    "committed once, after its last micro-batch); remove the key or set EXACTLY_ONCE"
                )
            continue
        if key not in _FIELD_OF_KEY:
            hint = unknown_key_hint(str(key), KNOWN_KEYS)
            raise CheckpointConfigError(f"unknown checkpoint key {key!r} (={value!r}, in {source}); {hint}")
        values[_FIELD_OF_KEY[key]] = _parse(key, value, source)
    config = CheckpointConfig(**values)  # type: ignore[arg-type]
    if config.min_pause > config.timeout:
        raise CheckpointConfigError(
            f"{MIN_PAUSE}={config.min_pause:g} s is longer than {TIMEOUT}={config.timeout:g} s "
            f"(in {source}); a pause that long would time out every checkpoint: shorten it"
        )
    return config


def stage_checkpointing(
    stage: str, own: object, *, pipeline: object, cluster: Callable[[], Mapping[str, object]]
) -> CheckpointConfig | None:
    """Whether and how ``stage`` is checkpointed: its own ``checkpointing=`` (True, False, a dict of
    keys, or None for the pipeline's), over the pipeline's (the same forms), over the cluster's keys
    (``cluster()``, asked for only when the stage is checkpointed)."""
    for value, where in ((own, f"stage {stage!r}"), (pipeline, "FailoverPipeline")):
        if value is not None and not isinstance(value, (bool, Mapping)):
            raise CheckpointConfigError(
                f"checkpointing={value!r} of {where}: give True, False or a dict of "
                f"execution.checkpointing.* keys (known keys: {', '.join(KNOWN_KEYS)})"
            )
    chosen = pipeline if own is None else own
    if not chosen:
        return None
    layers = [
        cluster(),
        pipeline if isinstance(pipeline, Mapping) else {},
        own if isinstance(own, Mapping) else {},
    ]
    return load_checkpoint_config(*layers, source=f"checkpointing of stage {stage!r}")


def refuse_staged_path_keys(stage: str, layers: Mapping[str, object]) -> None:
    """For ``stage`` on the executors' data path: a key of ``layers`` (where it was given → the stage's or
    the pipeline's ``checkpointing=``) that acts only on the staged path, refused with the fix."""
    for where, layer in layers.items():
        if not isinstance(layer, Mapping):
            continue
        for key in layer:
            if key in STAGED_PATH_ONLY:
                raise CheckpointConfigError(
                    f"{key}={layer[key]!r} (in {where}) has no effect on stage {stage!r}, whose data_path "
                    f"is 'executors': {STAGED_PATH_ONLY[key]}; remove the key, or give the stage "
                    "data_path='staged' (its micro-batches then go through the worker's disk)"
                )


def _parse(key: str, value: object, source: str) -> object:
    where = f"{key}={value!r} (in {source})"
    if key in (INTERVAL, MIN_PAUSE, TIMEOUT):
        try:
            seconds = parse_duration(value)
        except ValueError as err:
            raise CheckpointConfigError(f"{where}: {err}; {DURATION_HELP}") from None
        if seconds < 0 or (seconds == 0 and key != MIN_PAUSE):
            raise CheckpointConfigError(f"{where}: must be {'≥ 0' if key == MIN_PAUSE else '> 0'}")
        return seconds
    if key == INTERVAL_VOLUME:
        return parse_size(value, where)
    if key in (TOLERABLE_FAILED, NUM_RETAINED):
        number = _integer(value)
        least = 1 if key == NUM_RETAINED else 0
        if number is None or number < least:
            raise CheckpointConfigError(f"{where}: must be a whole number ≥ {least}")
        return number
    flag = _flag(value)
    if flag is None:
        raise CheckpointConfigError(f"{where}: must be true or false")
    return flag


def parse_size(value: object, where: str = "size") -> int:
    """Flink's memory size notation ("64 mb"); at least one byte (``failover/sizes.py``)."""
    try:
        return sizes.parse_size(value, where)
    except ValueError as err:
        raise CheckpointConfigError(str(err)) from None


def _integer(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _flag(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return (
        True if text in ("true", "1", "yes", "on") else False if text in ("false", "0", "no", "off") else None
    )
