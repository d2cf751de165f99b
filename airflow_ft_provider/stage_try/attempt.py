"""One try of a pipeline stage, phase by phase (``stage_try/__init__.py``)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path

from airflow_ft_provider.execution.backend import backend_for, connect_url
from airflow_ft_provider.execution.contracts import DataPlacement, StageBackend, WrittenOutput
from airflow_ft_provider.execution.placement import placement_for
from airflow_ft_provider.faults import TryFaults
from airflow_ft_provider.hooks.partition_store import executor_access
from airflow_ft_provider.model.data_path import DataPath
from airflow_ft_provider.partitions import Manifest
from airflow_ft_provider.stage_try.adoption import FinishedWorkAdoption, wait_for_running_work
from airflow_ft_provider.stage_try.checkpointed import CheckpointedTry
from airflow_ft_provider.stage_try.checkpointed_stream import StreamedCheckpointRun
from airflow_ft_provider.stage_try.commit import commit_outputs, release_consumed
from airflow_ft_provider.stage_try.entries import Committed
from airflow_ft_provider.stage_try.phases import TryPhases
from airflow_ft_provider.stage_try.plan import TryPlan, plan_try
from airflow_ft_provider.stage_try.reuse import OutputReuse
from airflow_ft_provider.stage_try.run_mode import PlainRun, RunMode
from airflow_ft_provider.stage_try.scope import TryScope


class StageTry:
    """The work of one try: only after the application succeeds are its outputs committed; a failure
    commits nothing."""

    def __init__(self, scope: TryScope, faults: TryFaults, phases: TryPhases | None = None) -> None:
        self.scope = scope
        self.faults = faults
        self.phases = phases or TryPhases()
        self.reuse = OutputReuse(scope)
        url = partial(connect_url, scope.spark_conn_id) if wait_for_running_work() else lambda: None
        self.adoption = FinishedWorkAdoption(scope, self.reuse, connect_url=url)
        self.backend: StageBackend | None = None
        self.read: Mapping[str, Manifest] = {}  # the blocking inputs read (lineage.py)
        self.committed: Committed | None = None

    def run(self) -> Committed:
        self.faults.before_work()
        # An earlier try's output instead of Spark work: committed and unchanged, or finished and killed
        with self.phases.phase("reuse"):
            earlier = self.reuse.try_reuse() or self.adoption.try_adopt()
        self.committed = earlier if earlier is not None else self._compute()
        return self.committed

    def kill(self) -> None:
        if self.backend is not None:
            self.backend.kill()

    def _compute(self) -> Committed:
        config = self.scope.checkpoint_config
        mode: RunMode = PlainRun(self.scope.log)
        if config is not None and self.scope.data_path is DataPath.EXECUTORS:
            mode = StreamedCheckpointRun(self.scope, config)  # nothing on this worker's disk
        elif config is not None:
            mode = CheckpointedTry(self.scope, config, kill=self.kill)
        phase = self.phases.phase
        with mode.workdir() as workdir, ExitStack() as stack:
            placement = self._placement(workdir, mode.processed)
            with phase("session"):
                backend = stack.enter_context(self._backend(workdir))
            checkpoint = mode.spec(fail_in_batch=self.faults.fail_in_batch)
            with phase("inputs"):
                plan = plan_try(
                    self.scope, placement, backend, checkpoint=checkpoint, lineage=self.reuse.lineage
                )
            self.read = plan.read
            with phase("spark"):
                written = self._run_spark(plan, backend, workdir)
            with phase("commit"):
                committed = commit_outputs(self.scope, plan, written, mode.finish())
            self.adoption.forget()
            with phase("release"):
                release_consumed(self.scope, plan, backend)
            return committed

    def _run_spark(self, plan: TryPlan, backend: StageBackend, workdir: Path) -> Mapping[str, WrittenOutput]:
        """The application, with this try's work recorded for a later try should this one be killed."""
        self.adoption.record_started(backend.try_session, plan.locations, plan.read, plan.lineage, workdir)
        try:
            backend.run(
                plan.spec, fail_in_app=self.faults.fails_in_app, credentials=plan.placement.credentials
            )
        except BaseException:  # none of its output is ever committed: its objects go now
            plan.placement.discard(plan.outputs.values(), self.scope.try_number)
            raise
        written = {name: backend.written(planned.spec) for name, planned in plan.outputs.items()}
        self.adoption.record(plan.locations, written, plan.read, plan.lineage, workdir)
        self.faults.after_work()
        return written

    def _placement(self, workdir: Path, processed: Collection[str]) -> DataPlacement:
        """Where the try's data goes (``execution/placement.py``): the stage's data path."""
        scope = self.scope
        return placement_for(
            scope.data_path,
            scope.store,
            workdir,
            processed=processed,
            executor_access=lambda: executor_access(scope.store, scope.description.aws_conn_id),
        )

    @contextmanager
    def _backend(self, workdir: Path) -> Iterator[StageBackend]:
        scope = self.scope
        self.backend = backend_for(
            scope.stage,
            conn_id=scope.spark_conn_id,
            workdir=workdir,
            store=scope.store,
            map_index=scope.map_index,
            log=scope.log,
            state=scope.task_state,
            try_number=scope.try_number,
        )
        with self.backend as backend:
            yield backend
