"""The pipeline as data: the stored description gives the same restart sets as the parsed pipeline."""

import json

import pytest

from airflow_ft_provider.failover import DistributionPattern, ResultPartitionType
from airflow_ft_provider.model.description import PipelineDescription, PipelineWiringError, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output

PIPELINED = ResultPartitionType.PIPELINED
POINTWISE = DistributionPattern.POINTWISE


def sharded() -> PipelineDescription:
    #   read[0..2] --part (pointwise)--> enrich[0..2] ~~rich (pipelined, pointwise)~~> score[0..2] --scores--> merge  # noqa: E501
    return PipelineDescription(
        "sharded",
        [
            StageDeclaration("read", 3, (), (Output("part"),), mapped=True),
            StageDeclaration(
                "enrich", 3, (Input("part", POINTWISE),), (Output("rich", PIPELINED),), mapped=True
            ),
            StageDeclaration(
                "score", 3, (Input("rich", POINTWISE),), (Output("scores", compression="zstd"),), mapped=True
            ),
            StageDeclaration("merge", 1, (Input("scores"),), ()),
        ],
        store="s3://lake/pipelines/",
        restart_config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 2},
        per_region_restarts=True,
    )


def test_round_trip_keeps_graph_regions_settings_and_restart_sets():
    original = sharded()
    loaded = PipelineDescription.from_json(original.to_json())
    assert loaded.to_json() == original.to_json()
    assert loaded.regions == original.regions
    assert frozenset({"enrich[1]", "score[1]"}) in loaded.regions
    assert loaded.failover_strategy().tasks_to_restart("score[1]", ["part[1]"]) == {
        "read[1]",
        "enrich[1]",
        "score[1]",
        "merge",
    }
    assert (loaded.store, loaded.per_region_restarts) == ("s3://lake/pipelines/", True)
    assert repr(loaded.restart_strategy()) == "FixedDelay(attempts=2, delay=1 s)"
    assert loaded.stages["score"].outputs[0].compression == "zstd"
    assert loaded.airflow_key("read[2]") == ("read", 2) and loaded.airflow_key("merge") == ("merge", -1)
    assert loaded.consumed_partitions("merge", None) == {"scores": ["scores[0]", "scores[1]", "scores[2]"]}
    assert loaded.upstream_tasks("score[0]") == {f"{s}[{i}]" for s in ("read", "enrich") for i in range(3)}


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d.update(version=99), "unsupported version 99"),
        (lambda d: d.pop("stages"), "'stages'"),
        (lambda d: d["stages"][0].update(task_id="../etc"), "invalid stage name '../etc'"),
        (
            lambda d: d["stages"][1]["inputs"][0].update(pattern="sideways"),
            "'sideways' is not a valid DistributionPattern",
        ),
        (
            lambda d: d["stages"][3]["inputs"][0].update(result="nope"),
            "consumes result 'nope', which no stage",
        ),
        (lambda d: d.update(restart_config=["x"]), "restart_config must be an object"),
    ],
)
def test_a_damaged_description_is_a_clear_error(damage, message):
    doc = json.loads(sharded().to_json())
    damage(doc)
    with pytest.raises(ValueError, match="invalid pipeline description") as err:
        PipelineDescription.from_json(json.dumps(doc).encode())
    assert message in str(err.value)


def test_not_json_and_oversized_descriptions_are_refused():
    with pytest.raises(ValueError, match="invalid pipeline description"):
        PipelineDescription.from_json(b"{not json")
    with pytest.raises(ValueError, match="more than"):
        PipelineDescription.from_json(b" " * (4 * 1024 * 1024 + 1))


@pytest.mark.parametrize(
    "raw, says",
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 32 levels"),
        (b'{"version": 1, "stages": [{"parallelism": 1' + b"0" * 4999 + b"}]}", "does not fit 64 bits"),
        (b'{"version": 1, "restart_config": {"restart-strategy.fixed-delay.delay": NaN}}', "NaN"),
        (b'{"version": 1, "version": 1}', "key 'version' appears twice"),
    ],
    ids=["deeply-nested", "5000-digit-parallelism", "NaN", "duplicate-key"],
)
def test_hostile_json_is_a_clear_error_not_a_recursion_error(raw, says):
    with pytest.raises(ValueError, match="invalid pipeline description") as err:
        PipelineDescription.from_json(raw)
    assert says in str(err.value)


def test_unknown_tasks_are_named():
    with pytest.raises(PipelineWiringError, match="'nope' is not a task of pipeline 'sharded'"):
        sharded().airflow_key("nope")
    with pytest.raises(PipelineWiringError, match="runs as map index 7"):
        sharded().core_task_id("read", 7)
