"""Pipelined regions: union over pipelined exchanges, merge of cycles over blocking exchanges."""

import pytest

from airflow_ft_provider.failover import (
    DistributionPattern,
    ResultPartitionType,
    StageGraph,
    pipelined_regions,
)

BLOCKING, PIPELINED = ResultPartitionType.BLOCKING, ResultPartitionType.PIPELINED
POINTWISE, ALL_TO_ALL = DistributionPattern.POINTWISE, DistributionPattern.ALL_TO_ALL


def regions_of(graph):
    return {frozenset(r) for r in pipelined_regions(graph)}


def chain(*links, parallelism=1):
    """A chain of stages s0 -> s1 -> ... with one result per link of the given (type, pattern)."""
    graph = StageGraph()
    graph.add_stage("s0", parallelism)
    for i, (result_type, pattern) in enumerate(links):
        graph.add_stage(f"s{i + 1}", parallelism)
        graph.add_result(f"r{i}", f"s{i}", result_type)
        graph.consume(f"s{i + 1}", f"r{i}", pattern)
    return graph


def test_all_blocking_chain_is_one_region_per_task():
    # s0 --blocking--> s1 --blocking--> s2
    graph = chain((BLOCKING, ALL_TO_ALL), (BLOCKING, ALL_TO_ALL))
    assert regions_of(graph) == {frozenset({"s0"}), frozenset({"s1"}), frozenset({"s2"})}


def test_all_to_all_pipelined_is_one_region():
    # s0[0..2] ==all-to-all pipelined==> s1[0..2] ==all-to-all pipelined==> s2[0..2]
    graph = chain((PIPELINED, ALL_TO_ALL), (PIPELINED, ALL_TO_ALL), parallelism=3)
    assert regions_of(graph) == {frozenset(graph.task_ids())}


def test_pointwise_pipelines_are_independent_chains():
    # s0[i] -> s1[i] -> s2[i], pipelined, i = 0..3: four embarrassingly parallel regions
    graph = chain((PIPELINED, POINTWISE), (PIPELINED, POINTWISE), parallelism=4)
    assert regions_of(graph) == {frozenset({f"s0[{i}]", f"s1[{i}]", f"s2[{i}]"}) for i in range(4)}


def test_pointwise_pipelined_plus_all_to_all_blocking_cycle_merges_into_one_region():
    #   X[0] --pipelined--> Y[0]        regions {X0,Y0} and {X1,Y1} depend on each other over
    #   X[1] --pipelined--> Y[1]        the blocking all-to-all exchange x2 (X0->Y1, X1->Y0):
    #   X[*] ==blocking all-to-all==> Y[*]   a cycle of regions, so Flink merges them.
    graph = StageGraph()
    graph.add_stage("X", 2)
    graph.add_stage("Y", 2)
    graph.add_result("x", "X", PIPELINED)
    graph.add_result("x2", "X", BLOCKING)
    graph.consume("Y", "x", POINTWISE)
    graph.consume("Y", "x2", ALL_TO_ALL)
    assert regions_of(graph) == {frozenset({"X[0]", "X[1]", "Y[0]", "Y[1]"})}


def test_merged_cycle_leaves_downstream_regions_alone():
    #   A[i] -pipelined pointwise-> B[i]           regions {A0,B0} <-> {A1,B1} merge (blocking cycle)
    #   A[*] ==blocking all-to-all==> B[*] ==blocking==> Z    Z stays its own region
    graph = StageGraph()
    graph.add_stage("A", 2)
    graph.add_stage("B", 2)
    graph.add_stage("Z")
    graph.add_result("a_pipe", "A", PIPELINED)
    graph.add_result("a_block", "A", BLOCKING)
    graph.add_result("b", "B", BLOCKING)
    graph.consume("B", "a_pipe", POINTWISE)
    graph.consume("B", "a_block", ALL_TO_ALL)
    graph.consume("Z", "b", ALL_TO_ALL)
    assert regions_of(graph) == {frozenset({"A[0]", "A[1]", "B[0]", "B[1]"}), frozenset({"Z"})}


def test_blocking_without_cycle_does_not_merge():
    # X[i] -pipelined pointwise-> Y[i]; X ==blocking pointwise==> Y (same index): no cross-region edge
    graph = StageGraph()
    graph.add_stage("X", 2)
    graph.add_stage("Y", 2)
    graph.add_result("x", "X", PIPELINED)
    graph.add_result("x2", "X", BLOCKING)
    graph.consume("Y", "x", POINTWISE)
    graph.consume("Y", "x2", POINTWISE)
    assert regions_of(graph) == {frozenset({"X[0]", "Y[0]"}), frozenset({"X[1]", "Y[1]"})}


@pytest.mark.parametrize(
    "producers, consumers, expected",
    [
        # 4 -> 2: consumer i reads producers [2i, 2i+2)
        (4, 2, [{"P[0]", "P[1]", "C[0]"}, {"P[2]", "P[3]", "C[1]"}]),
        # 2 -> 4: producer p feeds consumers [2p, 2p+2)
        (2, 4, [{"P[0]", "C[0]", "C[1]"}, {"P[1]", "C[2]", "C[3]"}]),
        # 3 -> 2 (uneven): consumer 0 reads [0, 1), consumer 1 reads [1, 3)
        (3, 2, [{"P[0]", "C[0]"}, {"P[1]", "P[2]", "C[1]"}]),
        # 2 -> 3 (uneven): producer 0 feeds [0, 2), producer 1 feeds [2, 3)
        (2, 3, [{"P[0]", "C[0]", "C[1]"}, {"P[1]", "C[2]"}]),
    ],
)
def test_pointwise_rule_for_unequal_parallelism(producers, consumers, expected):
    graph = StageGraph()
    graph.add_stage("P", producers)
    graph.add_stage("C", consumers)
    graph.add_result("p", "P", PIPELINED)
    graph.consume("C", "p", POINTWISE)
    assert regions_of(graph) == {frozenset(r) for r in expected}


def test_regions_are_listed_in_order_of_their_first_task():
    graph = chain((BLOCKING, ALL_TO_ALL), (PIPELINED, ALL_TO_ALL))
    assert pipelined_regions(graph) == [frozenset({"s0"}), frozenset({"s1", "s2"})]


def test_empty_graph_has_no_regions():
    assert pipelined_regions(StageGraph()) == []
