"""The plan phase: before any Spark work, what one try reads (every input partition resolved and
verified: PartitionNotFound names a missing one) and where it writes each output (a view in the Spark
Connect server, local staging, or the store)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from airflow_ft_provider.execution.contracts import DataPlacement, StageBackend
from airflow_ft_provider.execution.engine_views import check_engine_view
from airflow_ft_provider.failover.graph import subtask_id
from airflow_ft_provider.failover.indexed_name import indexed
from airflow_ft_provider.model.exchanges import Output
from airflow_ft_provider.partitions import Manifest, PartitionNotFound, PartitionRef
from airflow_ft_provider.partitions.pipelined import PipelinedPartitions
from airflow_ft_provider.partitions.pipelined_handle import EngineLocation, PipelinedHandle, execution_id
from airflow_ft_provider.recovery.pending import RunState
from airflow_ft_provider.spark.spec import (
    VIEW_PREFIX,
    CheckpointSpec,
    InputPartition,
    InputSpec,
    OutputSpec,
    StageSpec,
)
from airflow_ft_provider.stage_try.scope import TryScope


@dataclass(frozen=True)
class PlannedOutput:
    output: Output
    partition_id: str
    ref: PartitionRef
    spec: OutputSpec
    attempt: str | None  # S3 placements: the attempt prefix Spark writes into
    engine: EngineLocation | None  # a pipelined output the Spark Connect server keeps

    @property
    def pipelined(self) -> bool:
        return not self.output.result_type.is_reconsumable


@dataclass(frozen=True)
class EngineInput:
    """A pipelined input read from the view its producer's execution left in the Spark Connect server."""

    ref: PartitionRef
    handle: PipelinedHandle


@dataclass(frozen=True)
class TryPlan:
    """What the application is given (``spec``), and what the later phases need of the plan."""

    placement: DataPlacement
    spec: StageSpec
    outputs: Mapping[str, PlannedOutput]
    engine_inputs: tuple[EngineInput, ...]  # released once consumed
    read: Mapping[str, Manifest]  # partition id -> the manifest of each blocking input read
    lineage: str | None  # of the outputs (``stage_try/reuse.py``); None: never reused

    @property
    def locations(self) -> dict[str, tuple[str, str | None]]:
        """Result -> where the application writes it, and the attempt prefix (S3 placements)."""
        return {name: (p.spec.location, p.attempt) for name, p in self.outputs.items()}


def plan_try(
    scope: TryScope,
    placement: DataPlacement,
    backend: StageBackend,
    *,
    checkpoint: CheckpointSpec | None,
    lineage: Callable[[Mapping[str, Manifest]], str | None],
) -> TryPlan:
    planner = _Planner(scope, placement, backend)
    inputs, engine_inputs = planner.inputs()
    outputs = planner.outputs()
    spec = StageSpec(
        pipeline=scope.stage.dag_id,
        run_id=scope.run.run_id,
        stage=scope.stage_id,
        map_index=scope.map_index,
        try_number=scope.try_number,
        inputs=inputs,
        outputs={name: o.spec for name, o in outputs.items()},
        checkpoint=checkpoint,
        store=placement.access,
    )
    scope.log.info(
        "stage %s (%s, %s): reading %s, writing %s",
        scope.task,
        backend.name,
        placement.name,
        {n: [p.partition_id for p in i.partitions] for n, i in inputs.items()} or "nothing",
        sorted(outputs) or "nothing",
    )
    read = placement.read
    return TryPlan(placement, spec, outputs, engine_inputs, read, lineage(read))


class _Planner:
    def __init__(self, scope: TryScope, placement: DataPlacement, backend: StageBackend) -> None:
        self.scope = scope
        self.placement = placement
        self.backend = backend
        self.pipelined = PipelinedPartitions(scope.store)

    def inputs(self) -> tuple[dict[str, InputSpec], tuple[EngineInput, ...]]:
        """Every input partition's spec; a pipelined one is read from the execution its handle names, if
        that execution is current."""
        scope = self.scope
        graph = scope.description.graph
        inputs: dict[str, InputSpec] = {}
        engine_inputs: list[EngineInput] = []
        run_state: RunState | None = None
        for result, partition_ids in scope.consumed().items():
            producer = graph.stages[graph.results[result].producer]
            pipelined = not graph.results[result].result_type.is_reconsumable
            if pipelined and run_state is None:
                run_state = scope.recovery.run_state()
            partitions = []
            for number, partition_id in enumerate(partition_ids):
                ref = scope.run.parse(partition_id)
                handle = None
                if pipelined and run_state is not None:
                    producer_task = subtask_id(producer.name, max(ref.map_index, 0), producer.parallelism)
                    handle = self.pipelined.resolve(ref, ended_through=run_state.ended_through(producer_task))
                if handle is not None and handle.engine is not None:
                    check_engine_view(ref, handle, self.backend, consumer=scope.task)
                    engine_inputs.append(EngineInput(ref, handle))
                    partitions.append(InputPartition(partition_id, [], view=handle.engine.view))
                else:
                    partitions.append(self.placement.input_partition(ref, result, number, handle))
            inputs[result] = InputSpec(result, "pipelined" if pipelined else "blocking", partitions)
        return inputs, tuple(engine_inputs)

    def outputs(self) -> dict[str, PlannedOutput]:
        scope, backend = self.scope, self.backend
        parallelism = scope.description.graph.stages[scope.stage_id].parallelism
        # A checkpointed stage writes every output per micro-batch to files, never to an engine's view.
        in_engine = (
            backend.server and scope.stage.pipeline.pipelined_in_engine and not scope.checkpoint_config
        )
        planned = {}
        for output in scope.stage.outputs:
            partition_id = indexed(output.result, scope.map_index, parallelism)
            ref = scope.run.parse(partition_id)
            pipelined = not output.result_type.is_reconsumable
            attempt, engine = None, None
            if pipelined and in_engine:
                assert backend.server is not None
                engine = EngineLocation(
                    backend.server, backend.view_name(str(ref), execution_id(scope.try_number))
                )
                self._release_superseded(ref)
                location = VIEW_PREFIX + engine.view
            else:
                location, attempt = self.placement.output_location(
                    ref, output.result, pipelined=pipelined, try_number=scope.try_number
                )
            spec = OutputSpec(
                output.result, output.result_type.value, location, compression=output.compression
            )
            planned[output.result] = PlannedOutput(output, partition_id, ref, spec, attempt, engine)
        return planned

    def _release_superseded(self, ref: PartitionRef) -> None:
        """A new execution of the region starts: the view of the one it replaces is never read again."""
        try:
            previous = self.pipelined.current(ref)
        except PartitionNotFound:
            return  # an invalid handle: the publish replaces it
        if (
            previous is not None
            and previous.engine is not None
            and previous.engine.server == self.backend.server
        ):
            self.backend.drop(previous.engine.view)
