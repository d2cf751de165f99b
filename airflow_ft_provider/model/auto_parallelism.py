"""A stage's count of shards derived from the data it reads: Flink's adaptive batch scheduler rule.

    shards = ceil(committed bytes of the stage's blocking inputs / avg-data-volume-per-task),
             within [min-parallelism, max-parallelism]

Decided once per run, when every input is committed (``operators/auto_parallelism.py``), and recorded
with the run as the stage's map count with its reason ("12 shards: 3.1 GB at 256 MB per shard, max
64"). A region restart, or a producer rebuilt by backtracking whose output is now larger, keeps the
recorded count: a count that changed between tries would orphan the partitions of the indexes that
went away, and the consumers of the stage already read the partitions by the recorded count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from airflow_ft_provider.failover.key_hint import unknown_key_hint
from airflow_ft_provider.failover.sizes import human_size, parse_size

PREFIX = "execution.batch.adaptive.auto-parallelism."
AVG_VOLUME = PREFIX + "avg-data-volume-per-task"
MIN_PARALLELISM = PREFIX + "min-parallelism"
MAX_PARALLELISM = PREFIX + "max-parallelism"
KNOWN_KEYS = (AVG_VOLUME, MIN_PARALLELISM, MAX_PARALLELISM)
MIB = 1 << 20


@dataclass(frozen=True)
class ShardPlan:
    count: int
    reason: str


@dataclass(frozen=True)
class AutoParallelism:
    """Flink's defaults: 16 MiB per task, 1 to 128 tasks. A Spark stage's shard is a whole Spark job,
    so hundreds of megabytes per shard is the usual setting."""

    avg_bytes: int = 16 * MIB
    min_parallelism: int = 1
    max_parallelism: int = 128

    @classmethod
    def parse(cls, config: Mapping[str, object] | None, *, where: str) -> AutoParallelism:
        """The settings of ``config`` (Flink's keys); ValueError naming the key, the value and the fix."""
        given = dict(config or {})
        for key in given:
            if key not in KNOWN_KEYS:
                raise ValueError(f"{where}: unknown key {key!r}; {unknown_key_hint(key, KNOWN_KEYS)}")
        avg = cls.avg_bytes
        if AVG_VOLUME in given:
            avg = parse_size(given[AVG_VOLUME], f"{where} {AVG_VOLUME}={given[AVG_VOLUME]!r}")
        low = _count(given, MIN_PARALLELISM, cls.min_parallelism, where)
        high = _count(given, MAX_PARALLELISM, cls.max_parallelism, where)
        if low > high:
            raise ValueError(
                f"{where}: {MIN_PARALLELISM}={low} is above {MAX_PARALLELISM}={high}; lower the first or "
                "raise the second"
            )
        return cls(avg, low, high)

    def decide(self, input_bytes: int) -> ShardPlan:
        """The count for ``input_bytes`` of committed input, with the sentence that says why."""
        wanted = math.ceil(input_bytes / self.avg_bytes) if input_bytes > 0 else 0
        count = min(self.max_parallelism, max(self.min_parallelism, wanted))
        bound = ""
        if count == self.max_parallelism and wanted > count:
            bound = f", max {self.max_parallelism}"
        elif count == self.min_parallelism and wanted < count:
            bound = f", min {self.min_parallelism}"
        shards = "shard" if count == 1 else "shards"
        return ShardPlan(
            count,
            f"{count} {shards}: {human_size(input_bytes)} at {human_size(self.avg_bytes)} per shard{bound}",
        )


def _count(given: Mapping[str, object], key: str, default: int, where: str) -> int:
    if key not in given:
        return default
    value = given[key]
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if number is None or number < 1:
        raise ValueError(f"{where}: {key}={value!r} must be a whole number ≥ 1, e.g. {key}: {default}")
    return number
