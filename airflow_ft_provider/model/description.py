"""A pipeline as data: its stages, the partitions they exchange and its recovery settings.

``FailoverPipeline`` builds one when the DAG file is parsed. The first stage try of every run stores it
beside the run's partitions (``<pipeline>/<run>/_failover/pipeline.json``), so everything that acts on
a run later -- region failover in a worker, the UI plugin in the API server, ``airflow-ft`` -- works from
the pipeline the run was started with, without importing DAG files (the API server never runs DAG code).
"""

from __future__ import annotations

import difflib
import json
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from airflow_ft_provider.failover import (
    DistributionPattern,
    ResultPartitionType,
    StageGraph,
    failover_strategy_name,
    load_failover_strategy,
    load_restart_strategy,
    pipelined_regions,
)
from airflow_ft_provider.failover.clock import Clock
from airflow_ft_provider.failover.failover_strategies import FailoverStrategy
from airflow_ft_provider.failover.indexed_name import UNMAPPED, IndexedName, all_indexed, indexed
from airflow_ft_provider.failover.restart_strategies import RestartStrategy
from airflow_ft_provider.model.exchanges import Input, Output
from airflow_ft_provider.model.map_counts import check_counts, not_expanded, pending_stages
from airflow_ft_provider.safe_json import is_object_list, load_json

DESCRIPTION_VERSION = 1
MAX_DESCRIPTION_BYTES = 4 * 1024 * 1024


class PipelineWiringError(ValueError):
    """The stages of a pipeline do not fit together; raised while the DAG file is parsed."""


@dataclass(frozen=True)
class StageDeclaration:
    task_id: str
    parallelism: int
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]
    mapped: bool = False
    # Mapped over another task's output: ``parallelism`` is a placeholder (1) until a run records the
    # count (``model/map_counts.py``).
    expands_at_run_time: bool = False

    def to_dict(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "task_id": self.task_id,
            "parallelism": self.parallelism,
            "mapped": self.mapped,
            "inputs": [{"result": i.result, "pattern": i.pattern.value} for i in self.inputs],
            "outputs": [
                {"result": o.result, "type": o.result_type.value, "compression": o.compression}
                for o in self.outputs
            ],
        }
        if self.expands_at_run_time:  # only then: the stored form of other stages is unchanged
            doc["expands_at_run_time"] = True
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, object]) -> StageDeclaration:
        parallelism, inputs, outputs = doc["parallelism"], doc["inputs"], doc["outputs"]
        if not isinstance(parallelism, int) or not is_object_list(inputs) or not is_object_list(outputs):
            raise TypeError(f"stage {doc['task_id']!r}: parallelism, inputs or outputs of the wrong type")
        return cls(
            task_id=str(doc["task_id"]),
            parallelism=parallelism,
            mapped=bool(doc.get("mapped", False)),
            expands_at_run_time=doc.get("expands_at_run_time", False) is True,
            inputs=tuple(Input(str(i["result"]), DistributionPattern(i["pattern"])) for i in inputs),
            outputs=tuple(
                Output(str(o["result"]), ResultPartitionType(o["type"]), str(o["compression"]))
                for o in outputs
            ),
        )


class PipelineDescription:
    """Everything region failover needs to know about a pipeline; no Airflow objects.

    Building it checks the wiring (one producer per result, no unproduced inputs, no self-consumption);
    cycles and explicit-edge checks stay with ``FailoverPipeline``, which sees the DAG.
    """

    def __init__(
        self,
        dag_id: str,
        stages: Iterable[StageDeclaration],
        *,
        store: str | None = None,
        aws_conn_id: str = "aws_default",
        airflow_api_conn_id: str = "airflow_api",
        restart_config: Mapping[str, object] | None = None,
        per_region_restarts: bool = False,
        map_counts: Mapping[str, object] | None = None,
    ) -> None:
        self.dag_id = dag_id
        self.stages = {s.task_id: s for s in stages}
        self.store = store
        self.aws_conn_id = aws_conn_id
        self.airflow_api_conn_id = airflow_api_conn_id
        self.restart_config: dict[str, object] = dict(restart_config or {})
        self.per_region_restarts = per_region_restarts
        # Every stage, those expanding at run time at their placeholder count: how the DAG is wired.
        self.declared_graph = self._build_graph(self.stages.values(), {})
        self.run_time_stages = frozenset(s.task_id for s in self.stages.values() if s.expands_at_run_time)
        # The counts this run recorded for them (model/map_counts.py); the run's graph follows from them.
        self.map_counts = check_counts(map_counts or {}, self.run_time_stages)
        self.pending = frozenset(pending_stages(self.declared_graph, self.map_counts, self.run_time_stages))
        self.graph = self.declared_graph
        if self.run_time_stages:
            known = [s for s in self.stages.values() if s.task_id not in self.pending]
            self.graph = self._build_graph(known, self.map_counts)

    def with_map_count(self, stage: str, count: int) -> PipelineDescription:
        """This description with ``stage``'s count as a run recorded it."""
        return self._with_counts({**self.map_counts, stage: count})

    def with_map_counts_of(self, run: PipelineDescription) -> PipelineDescription:
        """This description with the counts ``run`` recorded for stages that expand at run time in both."""
        counts = {s: n for s, n in run.map_counts.items() if s in self.run_time_stages}
        return self._with_counts(counts) if counts != self.map_counts else self

    def _with_counts(self, counts: Mapping[str, int]) -> PipelineDescription:
        return PipelineDescription(
            self.dag_id,
            self.stages.values(),
            store=self.store,
            aws_conn_id=self.aws_conn_id,
            airflow_api_conn_id=self.airflow_api_conn_id,
            restart_config=self.restart_config,
            per_region_restarts=self.per_region_restarts,
            map_counts=counts,
        )

    def declares_as(self, other: PipelineDescription) -> bool:
        """The same pipeline, whatever counts either run recorded."""
        return self._to_doc(counts=False) == other._to_doc(counts=False)

    # -- building and (de)serialising ---------------------------------------------------------------
    def _build_graph(self, stages: Iterable[StageDeclaration], counts: Mapping[str, int]) -> StageGraph:
        """The graph of ``stages`` (their consumers among them); checks the wiring."""
        graph = StageGraph()
        producers: dict[str, str] = {}
        stages = list(stages)
        for stage in stages:
            graph.add_stage(stage.task_id, counts.get(stage.task_id, stage.parallelism))
            for output in stage.outputs:
                if output.result in producers:
                    raise PipelineWiringError(
                        f"result {output.result!r} is produced by both {producers[output.result]!r} and "
                        f"{stage.task_id!r}; every result needs exactly one producer stage"
                    )
                producers[output.result] = stage.task_id
                graph.add_result(output.result, stage.task_id, output.result_type)
        for stage in stages:
            for inp in stage.inputs:
                if inp.result not in producers:
                    close = difflib.get_close_matches(inp.result, producers, n=1)
                    hint = f"did you mean {close[0]!r}? " if close else ""
                    raise PipelineWiringError(
                        f"stage {stage.task_id!r} consumes result {inp.result!r}, which no stage of the "
                        f"pipeline produces; {hint}produced results: {sorted(producers) or 'none'}"
                    )
                if producers[inp.result] == stage.task_id:
                    raise PipelineWiringError(
                        f"stage {stage.task_id!r} consumes its own output {inp.result!r}; "
                        "split it into two stages"
                    )
                graph.consume(stage.task_id, inp.result, inp.pattern)
        return graph

    def to_json(self) -> bytes:
        return json.dumps(self._to_doc(counts=True), sort_keys=True).encode()

    def _to_doc(self, *, counts: bool) -> dict[str, object]:
        doc: dict[str, object] = {
            "version": DESCRIPTION_VERSION,
            "dag_id": self.dag_id,
            "store": self.store,
            "aws_conn_id": self.aws_conn_id,
            "airflow_api_conn_id": self.airflow_api_conn_id,
            "restart_config": self.restart_config,
            "per_region_restarts": self.per_region_restarts,
            "stages": [s.to_dict() for s in self.stages.values()],
        }
        if counts and self.map_counts:  # only then: a pipeline without any stores what it always did
            doc["map_counts"] = self.map_counts
        return doc

    @classmethod
    def from_json(cls, raw: bytes) -> PipelineDescription:
        """A stored description, validated: a damaged one is a clear error, never a wrong restart set."""
        if len(raw) > MAX_DESCRIPTION_BYTES:
            raise ValueError(f"pipeline description is {len(raw)} bytes, more than {MAX_DESCRIPTION_BYTES}")
        try:
            doc = load_json(raw, max_bytes=MAX_DESCRIPTION_BYTES)
            if not isinstance(doc, dict) or doc.get("version") != DESCRIPTION_VERSION:
                found = doc.get("version") if isinstance(doc, dict) else doc
                raise ValueError(f"unsupported version {reprlib.repr(found)}")
            restart_config, map_counts = doc["restart_config"], doc.get("map_counts", {})
            for name, value in (("restart_config", restart_config), ("map_counts", map_counts)):
                if not isinstance(value, dict):
                    raise ValueError(f"{name} must be an object")
            description = cls(
                str(doc["dag_id"]),
                [StageDeclaration.from_dict(s) for s in doc["stages"]],
                store=doc.get("store"),
                aws_conn_id=str(doc["aws_conn_id"]),
                airflow_api_conn_id=str(doc["airflow_api_conn_id"]),
                restart_config=restart_config,
                per_region_restarts=bool(doc["per_region_restarts"]),
                map_counts=map_counts,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            detail = f"{err!r} is missing" if isinstance(err, KeyError) else str(err)
            raise ValueError(f"invalid pipeline description: {detail}") from None
        return description

    # -- questions about the pipeline ---------------------------------------------------------------
    @cached_property
    def regions(self) -> list[frozenset[str]]:
        """The failover regions of the run's graph (``graph``)."""
        return pipelined_regions(self.graph)

    @cached_property
    def declared_regions(self) -> list[frozenset[str]]:
        """The regions as declared (a stage expanding at run time as one task): the DAG's TaskGroups."""
        return self.regions if self.graph is self.declared_graph else pipelined_regions(self.declared_graph)

    def failover_strategy(self) -> FailoverStrategy:
        return load_failover_strategy(self.restart_config, self.graph)

    def check_failover_strategy(self) -> None:
        """Fail at parse time on an unknown failover strategy, without building the strategy."""
        failover_strategy_name(self.restart_config)

    def restart_strategy(self, *, clock: Clock | None = None) -> RestartStrategy:
        return load_restart_strategy(self.restart_config, partitions_persisted=True, clock=clock)

    def airflow_key(self, core_task: str) -> tuple[str, int]:
        """The (task id, map index) of a core task id; -1 for a task that is not mapped."""
        try:
            task = IndexedName.parse(core_task)
        except ValueError:
            task = None
        if task is None or task.name not in self.stages:
            raise PipelineWiringError(f"{core_task!r} is not a task of pipeline {self.dag_id!r}")
        if task.mapped:
            return task.name, task.index
        return task.name, 0 if self.stages[task.name].mapped else UNMAPPED

    def tasks_named(self, name: str) -> list[str]:
        """The core tasks a user means by ``name``: that task (``stage`` or ``stage[i]``), or every map
        index of a mapped stage named without an index."""
        graph = self.graph
        if name in graph.stages:
            return list(graph.stages[name].task_ids)
        if name in graph.task_ids():
            return [name]
        if name.split("[")[0] in self.pending:
            raise PipelineWiringError(not_expanded(self.dag_id, name.split("[")[0]))
        tasks = graph.task_ids()
        raise PipelineWiringError(
            f"{name!r} is not a task of pipeline {self.dag_id!r}; tasks: {', '.join(tasks[:50])}"
            + (f", … ({len(tasks)} in all)" if len(tasks) > 50 else "")
            + "; a mapped stage's name alone means all its map indexes"
        )

    def core_task_id(self, task_id: str, map_index: int | None) -> str:
        """The failover core's id of a task instance: ``stage`` or ``stage[i]``."""
        if task_id in self.pending:
            raise PipelineWiringError(not_expanded(self.dag_id, task_id))
        if task_id not in self.graph.stages:
            raise PipelineWiringError(f"{task_id!r} is not a stage of pipeline {self.dag_id!r}")
        parallelism = self.graph.stages[task_id].parallelism
        if parallelism != 1 and (map_index is None or not 0 <= map_index < parallelism):
            where = "in the pipeline"
            why = "the list it expands over must not change between parsing and running"
            if task_id in self.run_time_stages:
                where, why = "recorded in this run", "the output it expands over changed during the run"
            raise PipelineWiringError(
                f"task {task_id!r} has {parallelism} map indexes {where}, but runs as map index "
                f"{map_index!r}; {why}"
            )
        return indexed(task_id, map_index, parallelism)

    def upstream_tasks(self, core_task: str) -> set[str]:
        """Every task whose partitions ``core_task`` reads, directly or through other stages."""
        stage = self.airflow_key(core_task)[0]
        stages: set[str] = set()
        frontier = [stage]
        while frontier:
            for producer in self.graph.upstream_stages(frontier.pop()):
                if producer not in stages:
                    stages.add(producer)
                    frontier.append(producer)
        return {task for name in stages for task in self.graph.stages[name].task_ids}

    def consumed_partitions(self, task_id: str, map_index: int | None) -> dict[str, list[str]]:
        """Result name -> the partition ids one task instance reads, by the declared patterns."""
        index = 0 if map_index is None or map_index < 0 else map_index
        consumed: dict[str, list[str]] = {}
        for consumption in self.graph.consumptions:
            if consumption.stage != task_id:
                continue
            producers = self.graph.stages[self.graph.results[consumption.result].producer].parallelism
            partitions: list[str] = []
            for group in self.graph.exchange_groups(consumption):
                if index in group.consumers:
                    partitions.extend(indexed(consumption.result, p, producers) for p in group.partitions)
            consumed[consumption.result] = partitions
        return consumed

    def consumer_tasks(self, result: str, map_index: int) -> set[str]:
        """The tasks (``stage[i]``) that read partition ``map_index`` of ``result``."""
        graph = self.graph
        index = max(map_index, 0)
        consumers: set[str] = set()
        for consumption in graph.consumptions:
            if consumption.result != result:
                continue
            parallelism = graph.stages[consumption.stage].parallelism
            for group in graph.exchange_groups(consumption):
                if index in group.partitions:
                    consumers.update(indexed(consumption.stage, i, parallelism) for i in group.consumers)
        return consumers

    def pipelined_partitions(self) -> list[str]:
        """Every pipelined partition id a run of the pipeline can produce (released when the run ends)."""
        partitions: list[str] = []
        for result in self.graph.results.values():
            if result.result_type.is_reconsumable:
                continue
            partitions.extend(all_indexed(result.name, self.graph.stages[result.producer].parallelism))
        return partitions
