"""Building a StageGraph: task and partition ids, and bad input rejected with the fix."""

import pytest

from airflow_ft_provider.failover import DistributionPattern, ResultPartitionType, StageGraph

BLOCKING = ResultPartitionType.BLOCKING


def test_task_and_partition_ids_follow_map_indexes():
    graph = StageGraph()
    graph.add_stage("single")
    graph.add_stage("mapped", 3)
    graph.add_result("one", "single", BLOCKING)
    graph.add_result("many", "mapped", BLOCKING)
    assert graph.task_ids() == ["single", "mapped[0]", "mapped[1]", "mapped[2]"]
    assert graph.partition_ids() == ["one", "many[0]", "many[1]", "many[2]"]
    assert graph.partition_ids("one") == ["one"]


def test_find_cycle_names_the_stages():
    graph = StageGraph()
    for stage in "ABC":
        graph.add_stage(stage)
    graph.add_result("a", "A", BLOCKING)
    graph.add_result("b", "B", BLOCKING)
    graph.consume("B", "a")
    graph.consume("C", "b")
    assert graph.find_cycle() is None
    graph.add_result("c", "C", BLOCKING)
    graph.consume("A", "c")
    assert graph.find_cycle() == ["A", "B", "C", "A"]


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda g: g.add_stage("A"), r"duplicate stage name 'A'"),
        (lambda g: g.add_stage(""), r"invalid stage name ''"),
        (lambda g: g.add_stage("x[1]"), r"invalid stage name 'x\[1\]'.*map indexes"),
        (lambda g: g.add_stage("../etc"), r"invalid stage name '../etc'"),
        (lambda g: g.add_stage("C", 0), r"stage 'C': parallelism must be an integer ≥ 1, got 0"),
        (lambda g: g.add_stage("C", True), r"parallelism must be an integer ≥ 1, got True"),
        (lambda g: g.add_result("a", "A", BLOCKING), r"duplicate result name 'a'.*stage 'A'"),
        (lambda g: g.add_result("z", "nope", BLOCKING), r"unknown stage 'nope' as producer of result 'z'"),
        (lambda g: g.add_result("z", "A", "blocking"), r"result 'z': result_type must be"),
        (lambda g: g.consume("A", "a"), r"cannot consume its own result 'a' \(self-loop\)"),
        (lambda g: g.consume("B", "nope"), r"unknown result 'nope'; known results: \['a'\]"),
        (lambda g: g.consume("nope", "a"), r"unknown stage 'nope' as consumer of result 'a'"),
        (lambda g: g.consume("B", "a", "pointwise"), r"pattern must be DistributionPattern"),
        (lambda g: (g.consume("B", "a"), g.consume("B", "a")), r"already consumes result 'a'"),
    ],
)
def test_bad_input_is_a_value_error_naming_value_and_fix(build, message):
    graph = StageGraph()
    graph.add_stage("A")
    graph.add_stage("B")
    graph.add_result("a", "A", BLOCKING)
    before = (graph.task_ids(), graph.partition_ids(), graph.consumptions)
    with pytest.raises(ValueError, match=message):
        build(graph)
    if "already consumes" not in message:
        assert (graph.task_ids(), graph.partition_ids(), graph.consumptions) == before


def test_pointwise_is_recorded_on_the_consumption():
    graph = StageGraph()
    graph.add_stage("A", 2)
    graph.add_stage("B", 2)
    graph.add_result("a", "A", BLOCKING)
    consumption = graph.consume("B", "a", DistributionPattern.POINTWISE)
    assert [(g.partitions, g.consumers) for g in graph.exchange_groups(consumption)] == [
        (range(0, 1), range(0, 1)),
        (range(1, 2), range(1, 2)),
    ]
