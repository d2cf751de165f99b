"""Stages mapped over another task's output: the run's graph is completed as their counts are recorded.

files (plain task) ──▶ parse[?] ~~rows (pipelined, pointwise)~~▶ score[?] ──scores──▶ report
"""

import pytest

from airflow_ft_provider.failover import DistributionPattern, ResultPartitionType
from airflow_ft_provider.model.description import PipelineDescription, PipelineWiringError, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output
from airflow_ft_provider.model.map_counts import count_mismatches

PIPELINED = ResultPartitionType.PIPELINED
POINTWISE = DistributionPattern.POINTWISE


def run_time_pipeline(**counts: int) -> PipelineDescription:
    return PipelineDescription(
        "daily_files",
        [
            StageDeclaration(
                "parse", 1, (), (Output("rows", PIPELINED),), mapped=True, expands_at_run_time=True
            ),
            StageDeclaration(
                "score",
                1,
                (Input("rows", POINTWISE),),
                (Output("scores"),),
                mapped=True,
                expands_at_run_time=True,
            ),
            StageDeclaration("report", 1, (Input("scores"),), ()),
        ],
        store="s3://lake/pipelines/",
        map_counts=counts,
    )


def test_before_any_count_every_stage_is_pending_and_the_declared_graph_wires_the_dag():
    description = run_time_pipeline()
    assert description.pending == {"parse", "score", "report"}
    assert list(description.graph.stages) == []
    assert description.declared_regions == [frozenset({"parse", "score"}), frozenset({"report"})]
    with pytest.raises(
        PipelineWiringError, match="'score' of pipeline 'daily_files' has not run in this run yet"
    ):
        description.core_task_id("score", 3)
    with pytest.raises(PipelineWiringError, match="has not run in this run yet"):
        description.tasks_named("score[3]")


def test_a_recorded_count_completes_the_graph_one_region_per_index():
    description = run_time_pipeline(parse=37).with_map_count("score", 37)
    assert description.pending == frozenset()
    assert description.graph.stages["score"].parallelism == 37
    assert frozenset({"parse[23]", "score[23]"}) in description.regions
    # A failure in index 23 restarts its region and the consumer region, nothing of another index
    assert description.failover_strategy().tasks_to_restart("score[23]", []) == {
        "parse[23]",
        "score[23]",
        "report",
    }
    assert description.consumed_partitions("report", None)["scores"][5] == "scores[5]"
    assert description.core_task_id("score", 36) == "score[36]"
    with pytest.raises(
        PipelineWiringError, match="37 map indexes recorded in this run, but runs as map index 37"
    ):
        description.core_task_id("score", 37)


def test_a_stage_downstream_of_a_pending_one_is_pending():
    description = run_time_pipeline(parse=4)
    assert description.pending == {"score", "report"}
    assert list(description.graph.stages) == ["parse"]
    assert description.regions == [frozenset({f"parse[{i}]"}) for i in range(4)]


def test_an_empty_map_keeps_its_stage_and_consumers_pending():
    description = run_time_pipeline(parse=0, score=0)
    assert description.pending == {"parse", "score", "report"}
    assert description.pipelined_partitions() == []


def test_counts_survive_the_stored_form_and_leave_the_declaration_alone():
    recorded = run_time_pipeline(parse=3, score=3)
    loaded = PipelineDescription.from_json(recorded.to_json())
    assert loaded.map_counts == {"parse": 3, "score": 3}
    assert loaded.declares_as(run_time_pipeline()) and loaded.to_json() != run_time_pipeline().to_json()
    assert run_time_pipeline().with_map_counts_of(loaded).map_counts == {"parse": 3, "score": 3}
    assert b"map_counts" not in run_time_pipeline().to_json()  # nothing recorded: nothing stored


@pytest.mark.parametrize(
    "counts, message",
    [({"report": 2}, "'report', which is not a stage that expands at run time"), ({"parse": -1}, "≥ 0")],
)
def test_a_stored_count_is_validated(counts, message):
    raw = (
        run_time_pipeline()
        .to_json()
        .replace(b'"dag_id"', b'"map_counts": %s, "dag_id"' % str(counts).replace("'", '"').encode())
    )
    with pytest.raises(ValueError, match=message):
        PipelineDescription.from_json(raw)


def test_unequal_counts_on_a_pointwise_pipelined_exchange_are_named():
    description = run_time_pipeline(parse=37, score=36)
    [mismatch] = count_mismatches(description.graph, "score", description.run_time_stages)
    text = mismatch.message()
    assert "'score' runs with 36 map indexes" in text and "'parse', which ran with 37" in text
    assert "expand both over the same upstream output" in text
    assert count_mismatches(run_time_pipeline(parse=5, score=5).graph, "score", {"parse", "score"}) == []
