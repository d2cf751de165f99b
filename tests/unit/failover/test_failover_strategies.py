"""Which tasks restart: Flink's region strategy (three rules) and the full strategy."""

import pytest

from airflow_ft_provider.failover import (
    DistributionPattern,
    RestartAllFailoverStrategy,
    RestartPipelinedRegionFailoverStrategy,
    ResultPartitionType,
    StageGraph,
    load_failover_strategy,
)

BLOCKING, PIPELINED = ResultPartitionType.BLOCKING, ResultPartitionType.PIPELINED
POINTWISE = DistributionPattern.POINTWISE


@pytest.fixture
def seed_002():
    """Seed 002's backtracking example, every exchange blocking and all-to-all:

    A --a--> B --b--> C
               \\--b--> D
    """
    graph = StageGraph()
    for stage in "ABCD":
        graph.add_stage(stage)
    graph.add_result("a", "A", BLOCKING)
    graph.add_result("b", "B", BLOCKING)
    graph.consume("B", "a")
    graph.consume("C", "b")
    graph.consume("D", "b")
    return RestartPipelinedRegionFailoverStrategy(graph)


def test_failed_consumer_with_available_input_restarts_alone(seed_002):
    assert seed_002.tasks_to_restart("C") == {"C"}


def test_missing_input_backtracks_to_producer_and_reschedules_its_other_consumers(seed_002):
    # b is gone: B re-runs; B's consumers C and D re-run (B may not be deterministic); A does not.
    assert seed_002.tasks_to_restart("C", unavailable=["b"]) == {"B", "C", "D"}


def test_backtracking_recurses_while_partitions_are_missing(seed_002):
    assert seed_002.tasks_to_restart("C", unavailable=["b", "a"]) == {"A", "B", "C", "D"}


def test_unavailable_partition_not_consumed_by_restarting_regions_is_ignored(seed_002):
    # a is missing, but nobody restarting reads it: D's failure needs only D.
    assert seed_002.tasks_to_restart("D", unavailable=["a"]) == {"D"}


def test_failure_of_a_producer_reschedules_all_consumers_transitively(seed_002):
    assert seed_002.tasks_to_restart("A") == {"A", "B", "C", "D"}
    assert seed_002.tasks_to_restart("B") == {"B", "C", "D"}


def test_regions_to_restart_starts_with_the_failed_region(seed_002):
    assert seed_002.regions_to_restart("C", ["b"]) == [
        frozenset({"C"}),
        frozenset({"B"}),
        frozenset({"D"}),
    ]


def test_pipelined_region_restarts_as_a_unit_with_downstream_regions():
    #   S --blocking--> [ T1 --pipelined--> T2 ] --blocking--> U
    graph = StageGraph()
    for stage in ("S", "T1", "T2", "U"):
        graph.add_stage(stage)
    graph.add_result("s", "S", BLOCKING)
    graph.add_result("t1", "T1", PIPELINED)
    graph.add_result("t2", "T2", BLOCKING)
    graph.consume("T1", "s")
    graph.consume("T2", "t1")
    graph.consume("U", "t2")
    strategy = RestartPipelinedRegionFailoverStrategy(graph)
    assert strategy.region_of("T2") == frozenset({"T1", "T2"})
    assert strategy.tasks_to_restart("T2") == {"T1", "T2", "U"}


def test_embarrassingly_parallel_failure_restarts_only_its_chain():
    #   read[i] --blocking pointwise--> clean[i] --blocking pointwise--> write[i],  i = 0..3
    graph = StageGraph()
    for stage in ("read", "clean", "write"):
        graph.add_stage(stage, 4)
    graph.add_result("raw", "read", BLOCKING)
    graph.add_result("cleaned", "clean", BLOCKING)
    graph.consume("clean", "raw", POINTWISE)
    graph.consume("write", "cleaned", POINTWISE)
    strategy = RestartPipelinedRegionFailoverStrategy(graph)
    assert strategy.tasks_to_restart("clean[2]") == {"clean[2]", "write[2]"}
    assert strategy.tasks_to_restart("write[1]", unavailable=["cleaned[1]", "raw[1]"]) == {
        "read[1]",
        "clean[1]",
        "write[1]",
    }


def test_all_to_all_pipelined_graph_restarts_everything():
    graph = StageGraph()
    graph.add_stage("map", 3)
    graph.add_stage("reduce", 3)
    graph.add_result("m", "map", PIPELINED)
    graph.consume("reduce", "m")
    strategy = RestartPipelinedRegionFailoverStrategy(graph)
    assert strategy.tasks_to_restart("reduce[1]") == set(graph.task_ids())


def test_merged_cycle_region_restarts_as_one():
    #   X[i] -pipelined pointwise-> Y[i] and X ==blocking all-to-all==> Y: one merged region
    graph = StageGraph()
    graph.add_stage("X", 2)
    graph.add_stage("Y", 2)
    graph.add_stage("Z")
    graph.add_result("x", "X", PIPELINED)
    graph.add_result("x2", "X", BLOCKING)
    graph.add_result("y", "Y", BLOCKING)
    graph.consume("Y", "x", POINTWISE)
    graph.consume("Y", "x2")
    graph.consume("Z", "y")
    strategy = RestartPipelinedRegionFailoverStrategy(graph)
    assert strategy.tasks_to_restart("Y[0]") == {"X[0]", "X[1]", "Y[0]", "Y[1]", "Z"}
    assert strategy.tasks_to_restart("Z") == {"Z"}


def test_full_strategy_restarts_every_task(seed_002):
    graph = StageGraph()
    graph.add_stage("A", 2)
    graph.add_stage("B")
    graph.add_result("a", "A", BLOCKING)
    graph.consume("B", "a")
    assert RestartAllFailoverStrategy(graph).tasks_to_restart("B") == {"A[0]", "A[1]", "B"}


@pytest.mark.parametrize(
    "strategy_class", [RestartPipelinedRegionFailoverStrategy, RestartAllFailoverStrategy]
)
def test_unknown_task_or_partition_names_are_rejected(strategy_class):
    graph = StageGraph()
    graph.add_stage("A", 2)
    graph.add_result("a", "A", BLOCKING)
    strategy = strategy_class(graph)
    with pytest.raises(ValueError, match=r"unknown task 'A\[7\]'"):
        strategy.tasks_to_restart("A[7]")
    with pytest.raises(ValueError, match=r"unknown partition 'a'.*\[i\]"):
        strategy.tasks_to_restart("A[0]", unavailable=["a"])


def test_load_failover_strategy_by_flink_key():
    graph = StageGraph()
    graph.add_stage("A")
    assert isinstance(load_failover_strategy({}, graph), RestartPipelinedRegionFailoverStrategy)
    config = {"jobmanager.execution.failover-strategy": "Full"}
    assert isinstance(load_failover_strategy(config, graph), RestartAllFailoverStrategy)
    with pytest.raises(ValueError, match=r"failover-strategy must be 'region' or 'full', got 'individual'"):
        load_failover_strategy({"jobmanager.execution.failover-strategy": "individual"}, graph)
