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


@pytest.mark.parametrize(("producers", "consumers"), [(1, 1), (1, 2), (2, 1), (1, 5), (5, 1)])
@pytest.mark.parametrize("kind", [ResultPartitionType.BLOCKING, ResultPartitionType.PIPELINED])
def test_with_one_task_on_either_side_pointwise_wires_as_all_to_all(producers, consumers, kind):
    #   P[0..p-1] --x--> C[0..c-1]    with p == 1 or c == 1: every consumer reads every partition either way
    #   (the live exchange matrix declares each such shape once, on the strength of this)
    from airflow_ft_provider.failover import pipelined_regions
    from airflow_ft_provider.failover.graph import subtask_ids

    def wiring(pattern):
        graph = StageGraph()
        graph.add_stage("P", producers)
        graph.add_stage("C", consumers)
        graph.add_result("x", "P", kind)
        consumption = graph.consume("C", "x", pattern)
        reads = {task: set() for task in subtask_ids("C", consumers)}
        for group in graph.exchange_groups(consumption):
            for c in group.consumers:
                reads[subtask_ids("C", consumers)[c]].update(group.partitions)
        return reads, sorted(map(sorted, pipelined_regions(graph)))

    pointwise, all_to_all = wiring(DistributionPattern.POINTWISE), wiring(DistributionPattern.ALL_TO_ALL)
    assert pointwise == all_to_all
    assert all(partitions == set(range(producers)) for partitions in pointwise[0].values())
