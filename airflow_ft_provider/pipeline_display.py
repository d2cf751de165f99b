"""What a failover pipeline shows in Airflow's UI: one TaskGroup per failover region of several stages,
and an Asset per blocking output (lineage, and DAGs scheduled on it)."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from airflow.sdk import DAG, Asset, TaskGroup

from airflow_ft_provider._compat import Task, add_outlets, move_into_group
from airflow_ft_provider.failover import StageGraph
from airflow_ft_provider.failover.union_find import UnionFind
from airflow_ft_provider.model.description import PipelineWiringError, StageDeclaration
from airflow_ft_provider.partitions.naming import StoreLayout


def declare_assets(
    dag_id: str,
    store_url: str,
    aws_conn_id: str,
    stages: Iterable[StageDeclaration],
    tasks_by_id: dict[str, Task],
) -> None:
    """Blocking outputs become Assets (outlets): lineage in the UI, and other DAGs can be scheduled
    on them."""
    layout = StoreLayout.from_url(store_url)
    for stage in stages:
        assets = [
            Asset(
                uri=f"s3://{layout.bucket}/{layout.prefix}{dag_id}/{output.result}",
                # No explicit name: it defaults to the URI, unique per store. A name shared by two
                # stores (the same DAG parsed with another bucket) makes Airflow fail the task
                # with AirflowInactiveAssetInInletOrOutletException.
                group="ft-partitions",
                # What the API server reads the run's journal with: the serialized DAG is the one
                # place it trusts to name the connection (plugins/trust.py).
                extra={"aws_conn_id": aws_conn_id},
            )
            for output in stage.outputs
            if output.result_type.is_reconsumable
        ]
        if not assets:
            continue
        add_outlets(tasks_by_id[stage.task_id], assets)


def group_regions(
    dag: DAG, graph: StageGraph, regions: Iterable[Collection[str]], tasks_by_id: dict[str, Task]
) -> dict[str, TaskGroup]:
    """One TaskGroup per multi-stage region. A region of map indexes (pointwise pipelines) is
    shown at stage level: the group holds every stage any of whose tasks share a region."""
    names = list(graph.stages)  # declaration order
    number = {name: i for i, name in enumerate(names)}
    stage_of = {task: number[stage.name] for stage in graph.stages.values() for task in stage.task_ids}
    joined = UnionFind(len(names))
    for region in regions:
        first, *others = sorted({stage_of[t] for t in region})
        for other in others:
            joined.union(first, other)
    groups: dict[int, list[str]] = {}
    for i, name in enumerate(names):
        groups.setdefault(joined.find(i), []).append(name)
    root = dag.task_group
    made: dict[str, TaskGroup] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        group_id = f"region_{members[0]}"
        if group_id in dag.task_dict or group_id in root.children:
            raise PipelineWiringError(f"cannot name the failover region of {members}: {group_id!r} is taken")
        pipelined = [
            r.name
            for r in graph.results.values()
            if r.producer in members and not r.result_type.is_reconsumable
        ]
        group = TaskGroup(
            group_id,
            dag=dag,
            parent_group=root,
            prefix_group_id=False,
            tooltip=(
                f"Failover region: {', '.join(members)} restart together (pipelined: {', '.join(pipelined)})"
            ),
            ui_color="#fde9c9",
        )
        for member in members:
            move_into_group(tasks_by_id[member], group)
        made[group_id] = group
    return made
