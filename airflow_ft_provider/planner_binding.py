"""Which stage an ``auto_parallelism`` planner sizes (``operators/auto_parallelism.py``), bound when the
pipeline is built: the stage that expands over the planner's output. The planner then runs after the
producers of that stage's inputs, and knows the stage it decides for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeGuard

from airflow_ft_provider._compat import Task, expand_references
from airflow_ft_provider.model.description import PipelineDescription, PipelineWiringError


class ShardPlanner(Protocol):
    """What binding needs of a planner task."""

    task_id: str
    stage: str | None

    def set_upstream(self, other: Task) -> None: ...


def is_planner(task: object) -> TypeGuard[ShardPlanner]:
    return bool(getattr(task, "is_shard_planner", False))


def bind_planners(tasks: Mapping[str, Task], description: PipelineDescription) -> dict[str, str]:
    """Planner task id -> the stage that expands over its output; each planner runs after the producers
    of that stage's inputs. PipelineWiringError for a planner no stage, or two, expand over, or whose
    stage reads a pipelined input (its size is known only as it is read)."""
    planners = {tid: t for tid, t in tasks.items() if is_planner(t)}
    bound: dict[str, str] = {}
    for stage in description.run_time_stages:
        for planner_id in expand_references(tasks[stage]):
            if planner_id not in planners:
                continue
            if planner_id in bound:
                raise PipelineWiringError(
                    f"stages {bound[planner_id]!r} and {stage!r} both expand over {planner_id!r}; give each "
                    "its own auto_parallelism()"
                )
            bound[planner_id] = stage
            _wire(planners[planner_id], stage, tasks, description)
    if unbound := sorted(set(planners) - set(bound)):
        raise PipelineWiringError(
            f"{unbound[0]!r} (auto_parallelism) sizes no stage: expand a stage of the pipeline over it"
        )
    return bound


def _wire(
    planner: ShardPlanner, stage: str, tasks: Mapping[str, Task], description: PipelineDescription
) -> None:
    declared = description.declared_graph
    inputs = description.stages[stage].inputs
    if not inputs:
        raise PipelineWiringError(
            f"stage {stage!r} expands over auto_parallelism() but reads no input to size its shards by; "
            "give it inputs, or expand it over a list"
        )
    for consumed in inputs:
        result = declared.results[consumed.result]
        if not result.result_type.is_reconsumable:
            raise PipelineWiringError(
                f"stage {stage!r} expands over auto_parallelism() and reads the pipelined result "
                f"{consumed.result!r}, whose size is known only as it is read; make it blocking"
            )
        planner.set_upstream(tasks[result.producer])
    planner.stage = stage
