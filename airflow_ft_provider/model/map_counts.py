"""Map counts decided at run time: a stage that expands over another task's output (``.expand(x=
upstream.output)``, ``expand_kwargs``, a map over a mapped stage's results) has as many map indexes as
that output has items, which only Airflow's scheduler knows, once the output exists.

The pipeline's declaration holds such a stage with a placeholder parallelism of 1 (enough to wire the
DAG and group its regions, which are decided per stage); each run records the count its tries ran with
in the run's stored description (``recovery/journal.py``), so every later reader, a failover decision,
the failover page, ``airflow-ft`` and the run's end, works from the same expanded graph. Until a
stage's count is recorded the stage is **pending**, and so is everything downstream of it: none of
them has run a try, so the run's graph leaves them out (there is nothing of theirs to restart, and
Airflow's dependencies hold them back until their producers are done). A count of 0 (an empty list:
Airflow skips the stage and its consumers) keeps them pending for good.

Flink's adaptive batch scheduler does the same for a job vertex: its parallelism is decided when its
inputs are finished, and the execution graph is completed then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_ft_provider.failover import DistributionPattern, StageGraph


@dataclass(frozen=True)
class RunTimeCount:
    """A stage's count in a run: as a try of it found Airflow expanded it, or as its planner decided."""

    stage: str
    count: int
    try_number: int | None
    reason: str = ""  # why this count (an auto parallelism's rule); Airflow's expansion by default


@dataclass(frozen=True)
class CountMismatch:
    """A pointwise pipelined exchange between two stages whose counts differ: each consumer index reads
    the pipelined partition of the producer index with its own number, so the counts must be equal."""

    producer: str
    producer_count: int
    consumer: str
    consumer_count: int
    result: str

    def message(self) -> str:
        return (
            f"stage {self.consumer!r} runs with {self.consumer_count} map indexes and reads the pipelined "
            f"result {self.result!r} pointwise from stage {self.producer!r}, which ran with "
            f"{self.producer_count}: a pointwise pipelined exchange pairs index i with index i, so both "
            "stages must expand over lists of the same length (expand both over the same upstream "
            "output), or make the result blocking"
        )


def check_counts(counts: Mapping[str, object], run_time_stages: Iterable[str]) -> dict[str, int]:
    """Recorded counts as stored: integers ≥ 0 for stages that expand at run time (ValueError if not)."""
    allowed = set(run_time_stages)
    checked: dict[str, int] = {}
    for stage, count in counts.items():
        if stage not in allowed:
            raise ValueError(f"map count of {stage!r}, which is not a stage that expands at run time")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"map count of {stage!r} must be an integer ≥ 0, got {count!r}")
        checked[stage] = count
    return checked


def not_expanded(dag_id: str, stage: str) -> str:
    """Why a pending stage's tasks cannot be named yet."""
    return (
        f"stage {stage!r} of pipeline {dag_id!r} has not run in this run yet: it or a stage upstream of "
        "it expands over another task's output, and no try of it has recorded its map indexes"
    )


def pending_stages(graph: StageGraph, counts: Mapping[str, int], run_time_stages: Iterable[str]) -> set[str]:
    """The stages of ``graph`` (the declared one) whose tasks are not known yet: those expanding at run
    time with no count (or 0), and every stage downstream of one."""
    pending = {stage for stage in run_time_stages if not counts.get(stage)}
    consumers: dict[str, set[str]] = {}
    for consumption in graph.consumptions:
        consumers.setdefault(graph.results[consumption.result].producer, set()).add(consumption.stage)
    frontier = list(pending)
    while frontier:
        for consumer in consumers.get(frontier.pop(), ()):
            if consumer not in pending:
                pending.add(consumer)
                frontier.append(consumer)
    return pending


def pending_names(graph: StageGraph, pending: Iterable[str]) -> frozenset[str]:
    """The pending stages (of the declared ``graph``) and the results they produce."""
    stages = set(pending)
    return frozenset(stages | {r.name for r in graph.results.values() if r.producer in stages})


def count_mismatches(graph: StageGraph, stage: str, run_time_stages: Iterable[str]) -> list[CountMismatch]:
    """The pointwise pipelined inputs of ``stage`` (in the run's graph) whose producer's count differs,
    where either count was decided at run time (literal counts are Flink's pointwise ranges)."""
    run_time = set(run_time_stages)
    mismatches = []
    consumer_count = graph.stages[stage].parallelism
    for consumption in graph.consumptions:
        if consumption.stage != stage or consumption.pattern is not DistributionPattern.POINTWISE:
            continue
        result = graph.results[consumption.result]
        if result.result_type.is_reconsumable or not {stage, result.producer} & run_time:
            continue
        producer_count = graph.stages[result.producer].parallelism
        if producer_count != consumer_count:
            mismatches.append(
                CountMismatch(result.producer, producer_count, stage, consumer_count, result.name)
            )
    return mismatches
