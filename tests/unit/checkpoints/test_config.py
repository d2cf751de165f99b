"""Flink's checkpoint keys: parsed with Flink's notation, refused with the reason where they mean nothing."""

import pytest

from airflow_ft_provider.checkpoints.config import (
    CheckpointConfig,
    CheckpointConfigError,
    load_checkpoint_config,
    parse_size,
)


def test_defaults_and_layers_override_key_by_key():
    assert load_checkpoint_config() == CheckpointConfig()
    cluster = {"execution.checkpointing.interval": "30 s", "state.checkpoints.num-retained": "3"}
    pipeline = {"execution.checkpointing.interval-volume": "64 mb"}
    stage = {"execution.checkpointing.interval": "2 min", "state.backend.local-recovery": "true"}
    config = load_checkpoint_config(cluster, pipeline, stage)
    assert (config.interval, config.interval_volume, config.num_retained) == (120.0, 64 << 20, 3)
    assert config.local_recovery is True and config.incremental is False
    assert load_checkpoint_config({"execution.checkpointing.mode": "exactly-once"}) == CheckpointConfig()


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("execution.checkpointing.interval", "soon", "execution.checkpointing.interval='soon'"),
        ("execution.checkpointing.interval", "0 s", "must be > 0"),
        ("execution.checkpointing.min-pause", "-1 s", "execution.checkpointing.min-pause"),
        ("execution.checkpointing.timeout", "", "execution.checkpointing.timeout"),
        ("execution.checkpointing.interval-volume", "lots", "not a size"),
        ("execution.checkpointing.interval-volume", "0 mb", "between 1 byte"),
        ("execution.checkpointing.tolerable-failed-checkpoints", "-1", "whole number ≥ 0"),
        ("state.checkpoints.num-retained", "0", "whole number ≥ 1"),
        ("state.checkpoints.num-retained", True, "whole number ≥ 1"),
        ("execution.checkpointing.incremental", "maybe", "true or false"),
        ("execution.checkpointing.unaligned", "true", "no checkpoint barriers"),
        ("execution.checkpointing.unaligned.enabled", True, "interval-volume instead"),
        ("execution.checkpointing.max-concurrent-checkpoints", 2, "one micro-batch at a time"),
        ("execution.checkpointing.mode", "AT_LEAST_ONCE", "exactly-once"),
        ("execution.checkpointing.intervall", "1 min", "unknown checkpoint key"),
    ],
)
def test_every_invalid_value_names_the_key_the_value_and_the_fix(key, value, says):
    with pytest.raises(CheckpointConfigError, match="in checkpointing= of stage 's'") as excinfo:
        load_checkpoint_config({key: value}, source="checkpointing= of stage 's'")
    assert says in str(excinfo.value)


def test_a_pause_longer_than_the_timeout_is_refused():
    with pytest.raises(CheckpointConfigError, match="would time out every checkpoint"):
        load_checkpoint_config({"execution.checkpointing.min-pause": "20 min"})


def test_sizes_read_like_flinks_memory_sizes():
    sizes = [parse_size(v) for v in ("1", "512 kb", "64 mb", "2g", "1.5 kb")]
    assert sizes == [1, 512 << 10, 64 << 20, 2 << 30, 1536]
