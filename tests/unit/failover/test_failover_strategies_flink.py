"""Flink's own tests of pipelined regions and region failover, ported in spirit to this project's API.

Each test names the Flink test it comes from (apache/flink, flink-runtime/src/test/java/org/apache/
flink/runtime/executiongraph/failover/). Flink builds its topologies vertex by vertex with
``topology.connect(producer, consumer, type)``, each call a new result partition; ``connect`` below
does the same with a StageGraph of parallelism-1 stages, naming the partition "<producer>-<consumer>".
Legend of the drawings: ``-->`` pipelined, ``==>`` blocking, ``X`` all-to-all between two pairs.

Not ported: the ``PIPELINED_APPROXIMATE`` and ``HYBRID_*`` cases (this project has only blocking and
pipelined exchanges), the co-location cases of the old building test (no co-location constraints
here) and ``testRegionFailoverDoesNotRestartCreatedExecutions`` (execution states are not part of
the pure core: tasks that never started are skipped when the restart is carried out, in
``recovery/coordinator.py``).
"""

from __future__ import annotations

import pytest

from airflow_ft_provider.failover import (
    DistributionPattern,
    RestartAllFailoverStrategy,
    RestartPipelinedRegionFailoverStrategy,
    ResultPartitionType,
    StageGraph,
    pipelined_regions,
)

P, B = ResultPartitionType.PIPELINED, ResultPartitionType.BLOCKING


def connect(*edges: tuple[str, str, ResultPartitionType], vertices: str = "") -> StageGraph:
    """A graph of single-task stages; ``vertices`` adds unconnected ones (space separated)."""
    graph = StageGraph()
    for name in [*vertices.split(), *(v for edge in edges for v in edge[:2])]:
        if name not in graph.stages:
            graph.add_stage(name)
    for producer, consumer, kind in edges:
        graph.add_result(f"{producer}-{consumer}", producer, kind)
        graph.consume(consumer, f"{producer}-{consumer}")
    return graph


def all_to_all(
    producers: str, consumers: str, kind: ResultPartitionType
) -> list[tuple[str, str, ResultPartitionType]]:
    return [(p, c, kind) for p in producers.split() for c in consumers.split()]


def regions(graph: StageGraph) -> set[frozenset[str]]:
    return {frozenset(region) for region in pipelined_regions(graph)}


def sets(*groups: str) -> set[frozenset[str]]:
    return {frozenset(group.split()) for group in groups}


# ------------------------------------------------------------------------------------------------
# SchedulingPipelinedRegionComputeUtilTest (also PipelinedRegionComputeUtilTest and the region
# building cases of RestartPipelinedRegionFailoverStrategyBuildingTest)
# ------------------------------------------------------------------------------------------------
def test_individual_vertices():
    # Flink: testIndividualVertices
    #   (v1)   (v2)   (v3)
    assert regions(connect(vertices="v1 v2 v3")) == sets("v1", "v2", "v3")


def test_embarrassingly_parallel_case():
    # Flink: testEmbarrassinglyParallelCase
    #   (a1) --> (b1)
    #   (a2) --> (b2)
    #   (a3) --> (b3)
    graph = connect(("a1", "b1", P), ("a2", "b2", P), ("a3", "b3", P))
    assert regions(graph) == sets("a1 b1", "a2 b2", "a3 b3")


def test_embarrassingly_parallel_case_as_mapped_stages():
    # The same shape as this project writes it: a[0..2] --pointwise pipelined--> b[0..2]
    graph = StageGraph()
    graph.add_stage("a", 3)
    graph.add_stage("b", 3)
    graph.add_result("x", "a", P)
    graph.consume("b", "x", DistributionPattern.POINTWISE)
    assert regions(graph) == sets("a[0] b[0]", "a[1] b[1]", "a[2] b[2]")


def test_one_component_via_two_exchanges():
    # Flink: testOneComponentViaTwoExchanges
    #   (a1) -+-> (b1) -+-> (c1)
    #         X         X
    #   (a2) -+-> (b2) -+-> (c2)
    graph = connect(*all_to_all("a1 a2", "b1 b2", P), *all_to_all("b1 b2", "c1 c2", P))
    assert regions(graph) == sets("a1 a2 b1 b2 c1 c2")


def test_one_component_via_cascade_of_joins():
    # Flink: testOneComponentViaCascadeOfJoins
    #   (v1)--+
    #         +--(v5)-+
    #   (v2)--+       |
    #                 +--(v7)
    #   (v3)--+       |
    #         +--(v6)-+
    #   (v4)--+
    graph = connect(
        ("v1", "v5", P), ("v2", "v5", P), ("v3", "v6", P), ("v4", "v6", P), ("v5", "v7", P), ("v6", "v7", P)
    )
    assert regions(graph) == sets("v1 v2 v3 v4 v5 v6 v7")


def test_one_component_instance_from_one_source():
    # Flink: testOneComponentInstanceFromOneSource
    #                 +--(v4)
    #         +--(v2)-+
    #         |       +--(v5)
    #   (v1)--+
    #         |       +--(v6)
    #         +--(v3)-+
    #                 +--(v7)
    graph = connect(
        ("v1", "v2", P), ("v1", "v3", P), ("v2", "v4", P), ("v2", "v5", P), ("v3", "v6", P), ("v3", "v7", P)
    )
    assert regions(graph) == sets("v1 v2 v3 v4 v5 v6 v7")


def test_two_components_via_blocking_exchange():
    # Flink: testTwoComponentsViaBlockingExchange
    #   (a1) -+-> (b1) ==> (c1)
    #         X
    #   (a2) -+-> (b2) ==> (c2)
    graph = connect(*all_to_all("a1 a2", "b1 b2", P), ("b1", "c1", B), ("b2", "c2", B))
    assert regions(graph) == sets("a1 a2 b1 b2", "c1", "c2")


def test_two_components_via_blocking_all_to_all_exchange():
    # Flink: testTwoComponentsViaBlockingExchange2
    #   (a1) -+-> (b1) =+=> (c1)
    #         X         X
    #   (a2) -+-> (b2) =+=> (c2)
    graph = connect(*all_to_all("a1 a2", "b1 b2", P), *all_to_all("b1 b2", "c1 c2", B))
    assert regions(graph) == sets("a1 a2 b1 b2", "c1", "c2")


def test_multiple_components_via_cascade_of_joins():
    # Flink: testMultipleComponentsViaCascadeOfJoins
    #   (1)--+
    #        +--(5)==+
    #   (2)--+       |
    #                +==>(7)
    #   (3)--+       |
    #        +--(6)==+
    #   (4)--+
    graph = connect(
        ("v1", "v5", P), ("v2", "v5", P), ("v3", "v6", P), ("v4", "v6", P), ("v5", "v7", B), ("v6", "v7", B)
    )
    assert regions(graph) == sets("v1 v2 v5", "v3 v4 v6", "v7")


def test_diamond_with_mixed_pipelined_and_blocking_exchanges():
    # Flink: testDiamondWithMixedPipelinedAndBlockingExchanges
    #         +==>(v2)--+
    #   (v1)--+         +-->(v4)
    #         +-->(v3)--+
    graph = connect(("v1", "v2", B), ("v1", "v3", P), ("v2", "v4", P), ("v3", "v4", P))
    assert regions(graph) == sets("v1 v2 v3 v4")


def test_cyclic_dependent_regions_are_merged():
    # Flink: testCyclicDependentRegionsAreMerged
    #         +==>(v2)==+
    #   (v1)--+         +-->(v4)        regions {v1, v3, v4} and {v2} depend on each other over
    #         +-->(v3)--+               the blocking exchanges: Tarjan merges them into one
    graph = connect(("v1", "v2", B), ("v1", "v3", P), ("v2", "v4", B), ("v3", "v4", P))
    assert regions(graph) == sets("v1 v2 v3 v4")
    strategy = RestartPipelinedRegionFailoverStrategy(graph)
    assert strategy.tasks_to_restart("v2") == {"v1", "v2", "v3", "v4"}


# ------------------------------------------------------------------------------------------------
# RestartPipelinedRegionFailoverStrategyTest
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def crossed_blocking():
    """Flink's topology of testRegionFailoverForRegionInternalErrors / ...DataConsumptionErrors:

    (v1) =+=> (v4)
          X
    (v2) =+=> (v5)

    (v3) ===> (v6)          every vertex its own region
    """
    graph = connect(("v1", "v4", B), ("v1", "v5", B), ("v2", "v4", B), ("v2", "v5", B), ("v3", "v6", B))
    return RestartPipelinedRegionFailoverStrategy(graph)


@pytest.mark.parametrize(
    "failed, restarts",
    [("v1", "v1 v4 v5"), ("v2", "v2 v4 v5"), ("v3", "v3 v6"), ("v4", "v4"), ("v5", "v5"), ("v6", "v6")],
)
def test_region_failover_for_region_internal_errors(crossed_blocking, failed, restarts):
    # Flink: testRegionFailoverForRegionInternalErrors -- the failed region and its consumer regions
    assert crossed_blocking.tasks_to_restart(failed) == set(restarts.split())


@pytest.mark.parametrize(
    "failed, missing, restarts",
    [
        ("v4", "v1-v4", "v1 v4 v5"),
        ("v4", "v2-v4", "v2 v4 v5"),
        ("v5", "v1-v5", "v1 v4 v5"),
        ("v5", "v2-v5", "v2 v4 v5"),
        ("v6", "v3-v6", "v3 v6"),
    ],
)
def test_region_failover_for_data_consumption_errors(crossed_blocking, failed, missing, restarts):
    # Flink: testRegionFailoverForDataConsumptionErrors -- a PartitionConnectionException names the
    # partition: its producer's region and all that region's consumers restart too
    assert crossed_blocking.tasks_to_restart(failed, unavailable=[missing]) == set(restarts.split())


@pytest.mark.parametrize(
    "unavailable, expected",
    [
        # Combination 1: rp1 and rp2 available
        ((), {"v1": "v1 v3", "v2": "v2 v3", "v3": "v3"}),
        # Combination 2: rp1 unavailable
        (("v1-v3",), {"v1": "v1 v3", "v2": "v1 v2 v3", "v3": "v1 v3"}),
        # Combination 3: rp2 unavailable
        (("v2-v3",), {"v1": "v1 v2 v3", "v2": "v2 v3", "v3": "v2 v3"}),
        # Combination 4: both unavailable
        (("v1-v3", "v2-v3"), {"v1": "v1 v2 v3", "v2": "v1 v2 v3", "v3": "v1 v2 v3"}),
    ],
)
def test_region_failover_for_various_result_partition_availability_combinations(unavailable, expected):
    # Flink: testRegionFailoverForVariousResultPartitionAvailabilityCombinations
    #   (v1) ==rp1==+
    #               (v3)            every vertex its own region; rp1 = "v1-v3", rp2 = "v2-v3"
    #   (v2) ==rp2==+
    strategy = RestartPipelinedRegionFailoverStrategy(connect(("v1", "v3", B), ("v2", "v3", B)))
    for failed, restarts in expected.items():
        assert strategy.tasks_to_restart(failed, unavailable=unavailable) == set(restarts.split()), failed


def test_region_failover_for_multiple_vertices_regions():
    # Flink: testRegionFailoverForMultipleVerticesRegions
    #   (v1) --> (v2) ==> (v3) --> (v4) ==> (v5) --> (v6)      regions {v1,v2} {v3,v4} {v5,v6}
    graph = connect(("v1", "v2", P), ("v2", "v3", B), ("v3", "v4", P), ("v4", "v5", B), ("v5", "v6", P))
    strategy = RestartPipelinedRegionFailoverStrategy(graph)
    assert regions(graph) == sets("v1 v2", "v3 v4", "v5 v6")
    assert strategy.tasks_to_restart("v3") == {"v3", "v4", "v5", "v6"}
    assert strategy.tasks_to_restart("v3", unavailable=["v2-v3"]) == {"v1", "v2", "v3", "v4", "v5", "v6"}


# ------------------------------------------------------------------------------------------------
# RestartAllFailoverStrategyTest
# ------------------------------------------------------------------------------------------------
def test_restart_all_failover_strategy_restarts_every_vertex():
    # Flink: RestartAllFailoverStrategyTest.testGetTasksNeedingRestart
    #   (v1) --> (v2) ==> (v3)
    graph = connect(("v1", "v2", P), ("v2", "v3", B))
    assert RestartAllFailoverStrategy(graph).tasks_to_restart("v1") == {"v1", "v2", "v3"}
