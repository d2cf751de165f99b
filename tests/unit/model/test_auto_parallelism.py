"""Flink's adaptive batch rule: shards = ceil(input bytes / avg-data-volume-per-task), within [min, max]."""

import pytest

from airflow_ft_provider.model.auto_parallelism import (
    AVG_VOLUME,
    MAX_PARALLELISM,
    MIN_PARALLELISM,
    AutoParallelism,
    human_size,
)

MB, GB = 1 << 20, 1 << 30
SPARK_SIZED = AutoParallelism.parse({AVG_VOLUME: "256 MB", MAX_PARALLELISM: 64}, where="test")


@pytest.mark.parametrize(
    "size, count, reason",
    [
        (10 * MB, 1, "1 shard: 10 MB at 256 MB per shard"),
        (1 * GB, 4, "4 shards: 1 GB at 256 MB per shard"),
        (1 * GB + 1, 5, "5 shards: 1 GB at 256 MB per shard"),
        (int(3.1 * GB), 13, "13 shards: 3.1 GB at 256 MB per shard"),
        (100 * GB, 64, "64 shards: 100 GB at 256 MB per shard, max 64"),
        (0, 1, "1 shard: 0 B at 256 MB per shard, min 1"),
    ],
)
def test_the_count_is_the_input_over_the_volume_per_shard_within_the_bounds(size, count, reason):
    plan = SPARK_SIZED.decide(size)
    assert (plan.count, plan.reason) == (count, reason)


def test_flinks_defaults_and_a_minimum():
    assert AutoParallelism.parse(None, where="test") == AutoParallelism(16 * MB, 1, 128)
    at_least_four = AutoParallelism.parse({MIN_PARALLELISM: "4"}, where="test")
    assert at_least_four.decide(20 * MB).reason == "4 shards: 20 MB at 16 MB per shard, min 4"


@pytest.mark.parametrize(
    "config, says",
    [
        ({AVG_VOLUME: "lots"}, f"{AVG_VOLUME}='lots': not a size"),
        (
            {"execution.batch.adaptive.auto-parallelism.max-paralelism": 3},
            f"did you mean '{MAX_PARALLELISM}'",
        ),
        ({MAX_PARALLELISM: 0}, f"{MAX_PARALLELISM}=0 must be a whole number ≥ 1"),
        ({MIN_PARALLELISM: 8, MAX_PARALLELISM: 4}, f"{MIN_PARALLELISM}=8 is above {MAX_PARALLELISM}=4"),
    ],
)
def test_a_bad_setting_names_the_key_the_value_and_the_fix(config, says):
    with pytest.raises(ValueError, match="auto_parallelism of 'x'") as err:
        AutoParallelism.parse(config, where="auto_parallelism of 'x'")
    assert says in str(err.value)


def test_sizes_read_as_people_write_them():
    assert [human_size(n) for n in (0, 999, 12 * 1024, 256 * MB, int(3.1 * GB))] == [
        "0 B",
        "999 B",
        "12 KB",
        "256 MB",
        "3.1 GB",
    ]
