"""One run's recovery: the one door every caller goes through, from a failure to its restart.

    RunRecovery.for_worker(context)            the retry policy and a stage try's start (a worker that
                                               parsed the DAG file: the DAG carries its pipeline)
    RunRecovery.for_reader(store, dag, run)    the failover page and ``airflow-ft`` (no DAG file: the
                                               pipeline the run stored)

Either way the run's recovery follows the pipeline stored with the run (``_failover/pipeline.json``);
a worker uses the one it parsed only before the run's first try stored it. Behind the door, one job
per module: ``decide`` (a failure), ``gate`` (a try's start), ``reconcile`` (pending clears),
``clearing`` (the REST API's clears), ``journal`` (the state in S3).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager

from airflow_ft_provider.failover.classification import FailureLabels
from airflow_ft_provider.failover.clock import Clock, SystemClock
from airflow_ft_provider.failover.decision import FailoverDecision
from airflow_ft_provider.hooks.task_instances import TaskInstanceApi
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.model.map_counts import RunTimeCount
from airflow_ft_provider.model.parsed import parsed_description
from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.clearing import RestartClears
from airflow_ft_provider.recovery.decide import FailureHandler
from airflow_ft_provider.recovery.gate import TryGate
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.recovery.journal_events import ManualRestart, StageExpanded, TryEvent
from airflow_ft_provider.recovery.pending import RunState
from airflow_ft_provider.recovery.reconcile import PendingClears
from airflow_ft_provider.recovery.scope import RunScope
from airflow_ft_provider.recovery.try_start import TryStart


class RunNotReady(LookupError):
    """The run has no stored pipeline yet: no stage try of it has started (or it uses another store)."""


class RunRecovery:
    """Region failover for one DAG run: a failure, the start of a try, a manual restart."""

    def __init__(
        self,
        pipeline: PipelineDescription,
        run_id: str,
        store: S3PartitionStore,
        *,
        api: TaskInstanceApi | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.run = RunRef(pipeline.dag_id, run_id)
        self.store = store
        self.journal = RecoveryJournal(store, self.run)
        self.clock = clock or SystemClock()
        self._api = api
        scope = RunScope(pipeline, self.run, store, self.journal, self.clock)
        self.clears = RestartClears(scope, self._rest)
        self.pending = PendingClears(scope, self.clears)
        self.failures = FailureHandler(scope, self.pending, stop=self._fail_unfinished)
        self.gate = TryGate(
            scope, failures=self.failures, pending=self.pending, clears=self.clears, rest=self._rest
        )

    # -- the door -----------------------------------------------------------------------------------
    @classmethod
    def for_worker(
        cls,
        context: Mapping[str, object],
        *,
        parsed: PipelineDescription | None = None,
        store: S3PartitionStore | None = None,
        settle: bool = False,
        expanded: RunTimeCount | None = None,
    ) -> RunRecovery:
        """In a worker: the run's stored pipeline, else the one its DAG file parsed to (``parsed``, or
        the one the context's DAG carries). ``settle`` (a stage try's start) stores the parsed one as
        the run's, unless a pending restart depends on the stored one
        (``RecoveryJournal.settle_description``), and records ``expanded``, the count of a stage mapped
        over another task's output (``model/map_counts.py``), before anything reads the run's graph."""
        parsed = parsed or parsed_description(context["dag"])
        run_id = context["run_id"]
        assert isinstance(run_id, str)
        if store is None:
            from airflow_ft_provider.hooks.partition_store import pipeline_store

            store = pipeline_store(parsed)
        journal = RecoveryJournal(store, RunRef(parsed.dag_id, run_id))
        description = journal.settle_description(parsed, now=time.time()) if settle else journal.description()
        if settle and expanded is not None:
            known = None if description is None else description.map_counts.get(expanded.stage)
            if known != expanded.count:  # else the run recorded it already: nothing to write
                description = cls._record_count(journal, expanded)
        return cls(description or parsed, run_id, store)

    def record_count(self, counted: RunTimeCount) -> PipelineDescription:
        """Record a stage's count with the run (an ``auto_parallelism`` planner's decision); the run's
        pipeline with it."""
        return self._record_count(self.journal, counted)

    @staticmethod
    def _record_count(journal: RecoveryJournal, expanded: RunTimeCount) -> PipelineDescription:
        description, before = journal.record_map_count(expanded.stage, expanded.count)
        if before != expanded.count:
            why = expanded.reason or (
                f"{expanded.count} map indexes, as Airflow expanded it over the output it is mapped over"
            )
            if before is not None:
                why += f" ({before} before: that output changed during the run)"
            journal.record(
                StageExpanded(
                    task=expanded.stage,
                    try_number=expanded.try_number,
                    count=expanded.count,
                    previous=before,
                    reason=why,
                )
            )
        return description

    @classmethod
    def for_reader(
        cls, store: S3PartitionStore, dag_id: str, run_id: str, *, api: TaskInstanceApi | None = None
    ) -> RunRecovery:
        """Where no DAG file is parsed (the UI, the CLI): the pipeline the run stored; RunNotReady before
        its first stage try stored one."""
        description = RecoveryJournal(store, RunRef(dag_id, run_id)).description()
        if description is None:
            raise RunNotReady(
                f"run {run_id!r} of DAG {dag_id!r} has no stored pipeline in {store.layout.url}"
            )
        return cls(description, run_id, store, api=api)

    def handle_failure(
        self,
        task_id: str,
        map_index: int | None,
        try_number: int,
        cause: BaseException | str,
        *,
        labels: FailureLabels | None = None,
    ) -> FailoverDecision:
        """A try failed (the retry policy): decide, record, clear the other tasks of the restart set."""
        return self.failures.handle(task_id, map_index, try_number, cause, labels=labels)

    def before_try(self, task_id: str, map_index: int | None, try_number: int) -> TryStart:
        """A try starts: proceed, wait (deferred) or step aside (superseded)."""
        return self.gate.before_work(task_id, map_index, try_number)

    def restart_regions(
        self, task: str, *, reason: str = "manual restart", user: str | None = None
    ) -> list[str]:
        """Restart ``task``'s region (every index's, for a mapped stage's name) and the consumer regions
        now, re-using available upstream partitions; not counted against the restart strategy.

        Refused with :class:`DamagedJournal` before anything is cleared when the run's recovery state
        cannot be trusted: the restart writes it, and the next failure's decision reads it."""
        named = self.pipeline.tasks_named(task)  # a clear error for a name that is not in the pipeline
        failover, unavailable = self.pipeline.failover_strategy(), self.failures.unavailable_partitions()
        regions = list(dict.fromkeys(r for t in named for r in failover.regions_to_restart(t, unavailable)))
        tasks = set().union(*regions)

        def no_waiting(state: RunState) -> None:
            self.journal.check_budgets(state, self.pipeline)  # raises before anything is written
            for name in tasks:
                state.not_before.pop(name, None)

        self.journal.update(no_waiting)
        cleared = self.clears.clear_started(tasks)
        self.journal.record(
            ManualRestart(
                time=self.clock.now(),
                task=task,
                reason=reason,
                regions=tuple(tuple(sorted(r)) for r in regions),
                tasks=tuple(sorted(tasks)),
                cleared=tuple(cleared),
                user=user or None,
            )
        )
        return cleared

    # -- a stage try's own history ------------------------------------------------------------------
    def record_try(self, event: TryEvent) -> None:
        """How a try came by its outputs, or where its checkpointed work started (``journal_events.py``)."""
        self.journal.record(event)

    def run_state(self) -> RunState:
        """The run's recovery state: which execution of a region a pipelined input belongs to."""
        return self.journal.load()

    def found_lost(self) -> frozenset[str]:
        """Partitions a decision of this run found lost (a retry's commits rebuild them), for metrics."""
        return self.journal.found_lost()

    def named_by_manual_restart(self, task: str, *, since: float) -> bool:
        """Whether a manual restart after ``since`` named ``task``'s region: the user asked for it to be
        computed again (the consumer regions it rescheduled may still reuse their outputs)."""
        return any(
            isinstance(event, ManualRestart) and event.time > since and event.named(task)
            for event in self.journal.events()
        )

    def store_pointer(self) -> dict[str, str]:
        """What a try pushes as XCom ``ft_store``: the store's URL and connection name (compared by the
        API server with what the DAG names, never used)."""
        return self.journal.store_pointer(self.pipeline.aws_conn_id)

    # -- the REST client ----------------------------------------------------------------------------
    def _fail_unfinished(self, keys: Collection[tuple[str, int]], note: str) -> list[tuple[str, int]]:
        """Fail these instances of the run that have not ended (``hooks/region_stop.py``); an API given
        directly (the UI, tests) that cannot, fails none."""
        if self._api is not None:
            fail = getattr(self._api, "fail_unfinished", None)
            return list(fail(self.run.pipeline, self.run.run_id, keys, note)) if fail is not None else []
        from airflow_ft_provider.hooks.airflow_api import AirflowApiHook
        from airflow_ft_provider.hooks.region_stop import fail_unfinished

        with AirflowApiHook(self.pipeline.airflow_api_conn_id) as hook:
            return fail_unfinished(hook, self.run.pipeline, self.run.run_id, keys, note)

    @contextmanager
    def _rest(self) -> Iterator[TaskInstanceApi]:
        """The API given, else a hook of the pipeline's ``airflow_api`` connection, closed afterwards
        (a RunRecovery is made per failure; its sockets must not linger)."""
        if self._api is not None:
            yield self._api
            return
        from airflow_ft_provider.hooks.airflow_api import AirflowApiHook

        with AirflowApiHook(self.pipeline.airflow_api_conn_id) as hook:
            yield hook
