"""A failover-aware pipeline: stage operators wired by the partitions they exchange.

    with DAG("orders_etl", schedule=None) as dag:
        with FailoverPipeline(store="s3://lake/pipelines", restart_strategy={...}):
            SparkStageOperator(task_id="extract", application="jobs/extract.py", outputs=["raw"])
            SparkStageOperator(task_id="clean", application="jobs/clean.py", inputs=["raw"],
                               outputs=["cleaned"])

On leaving the ``with`` block the pipeline builds the core's StageGraph from the stages declared in
it, checks the wiring, adds every producer >> consumer dependency the partitions imply, and puts each
multi-stage failover region into a TaskGroup. Everything that can be wrong is reported here, when the
DAG is parsed. Wiring rule: dependencies between stages are *derived* from partitions; an explicit
edge between two stages is allowed only where the downstream stage consumes a result of the upstream
one. Edges to and from other tasks (sensors, notifications) are untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType

from airflow.sdk import DAG, TaskGroup

from airflow_ft_provider._compat import (
    RETRY_BUDGET,
    Task,
    current_dag,
    request_dag_callbacks,
    set_arguments,
)
from airflow_ft_provider.failover import (
    StageGraph,
)
from airflow_ft_provider.failover.classification import FailureLabels, FailureRules
from airflow_ft_provider.failover.durations import parse_duration
from airflow_ft_provider.model.data_path import DataPath
from airflow_ft_provider.model.description import (
    PipelineDescription,
    PipelineWiringError,
    StageDeclaration,
)
from airflow_ft_provider.model.parsed import attach, attached, parsed_description
from airflow_ft_provider.model.reuse_scope import ReuseScope
from airflow_ft_provider.partitions.naming import check_name
from airflow_ft_provider.pipeline_display import declare_assets, group_regions
from airflow_ft_provider.planner_binding import bind_planners, is_planner
from airflow_ft_provider.recovery.failure_facts import StageClassification
from airflow_ft_provider.recovery.layered_restarts import (
    UNSEEN_TRY_RETRY,
    own_retry_settings,
    pipeline_restart_config,
    where_set,
)
from airflow_ft_provider.stage_settings import (
    checkpoint_configs,
    data_paths,
    pipeline_data_path,
    stage_arguments,
    stage_classifications,
    stage_declaration,
)

__all__ = ["RETRY_BUDGET", "FailoverPipeline", "pipeline_of", "stage_declaration"]


def pipeline_of(dag: DAG) -> FailoverPipeline:
    """The FailoverPipeline declared in ``dag`` (which carries it); PipelineWiringError if none."""
    parsed_description(dag)  # says what is wrong when the DAG has none
    pipeline = attached(dag)
    assert isinstance(pipeline, FailoverPipeline)
    return pipeline


def cluster_store_conn_id() -> str:
    """``[ft_provider] partition_store_conn_id``: the connection of the cluster's default store, used by
    pipelines that name none, by ``airflow-ft`` and by the API server (read here, not in the store's
    hook module, which a DAG parse does not import)."""
    from airflow.sdk import conf

    return conf.get("ft_provider", "partition_store_conn_id", fallback=None) or "aws_default"


def pipeline_retention(value: str | float) -> float:
    """A pipeline's ``retention=``, checked when the DAG is parsed."""
    try:
        return parse_duration(value)
    except ValueError as err:
        raise PipelineWiringError(
            f"FailoverPipeline retention={value!r}: {err}; e.g. retention='3 d' (or leave it out for "
            "[ft_provider] partition_store_retention)"
        ) from None


class FailoverPipeline:
    dag: DAG  # the DAG whose with block it was entered in

    def __init__(
        self,
        *,
        store: str | None = None,
        aws_conn_id: str | None = None,
        spark_conn_id: str = "spark_default",
        restart_strategy: Mapping[str, object] | None = None,
        failover_strategy: str | None = None,
        per_region_restarts: bool = False,
        airflow_api_conn_id: str = "airflow_api",
        data_path: DataPath | str | None = None,
        pipelined_in_engine: bool = True,
        group_regions: bool = True,
        checkpointing: bool | Mapping[str, object] | None = None,
        failure_rules: FailureRules | Mapping[str, object] | None = None,
        failure_classifier: Callable[[BaseException], bool | None] | None = None,
        retention: str | float | None = None,
        reuse: ReuseScope | str = ReuseScope.WITHIN_RUN,
    ) -> None:
        self.store = store
        # Where a try may take outputs computed already from the same inputs and code (model/reuse_scope.py)
        self.reuse = ReuseScope.parse(reuse, where="FailoverPipeline")
        # How long this pipeline's ended runs are kept (else [ft_provider] partition_store_retention);
        # recorded in each run's end marker (partitions/sweep.py).
        self.retention = None if retention is None else pipeline_retention(retention)
        # Which failures a restart cannot heal, on top of the defaults (recovery/failure_facts.py); each
        # stage's own extend these. Checked when the pipeline is built.
        self.failure_rules = failure_rules
        self.failure_classifier = failure_classifier
        # per stage, built with the pipeline
        self.failure_classifications: dict[str, StageClassification] = {}
        self.checkpointing = checkpointing  # the stages' default (checkpoints/config.py)
        self.aws_conn_id = aws_conn_id or cluster_store_conn_id()
        self.spark_conn_id = spark_conn_id
        try:
            self.restart_config = pipeline_restart_config(
                restart_strategy or {},
                failover_strategy=failover_strategy,
                partitions_persisted=self.store_url is not None,
            )
        except ValueError as err:  # a Flink key or value: the same error type as every other setting
            raise PipelineWiringError(str(err)) from None
        self.per_region_restarts = per_region_restarts
        self.airflow_api_conn_id = airflow_api_conn_id
        try:  # where partition data flows (model/data_path.py): the pipeline's, else the deployment's
            self.data_path = pipeline_data_path(data_path)
        except ValueError as err:
            raise PipelineWiringError(str(err)) from None
        self.pipelined_in_engine = pipelined_in_engine
        self.group_regions = group_regions
        self.description: PipelineDescription | None = None  # built on leaving the with block
        self.graph = StageGraph()
        self.stages: dict[str, StageDeclaration] = {}
        self.regions: list[frozenset[str]] = []
        self.region_groups: dict[str, TaskGroup] = {}
        self.stage_connections: dict[str, str] = {}  # stage -> its Spark connection id
        self._tasks_before: set[str] = set()

    def failure_labels(self, task_id: str, failure: BaseException) -> FailureLabels:
        """``failure`` of stage ``task_id`` classified with the stage's rules (the defaults for a task
        the pipeline did not build)."""
        return self.failure_classifications.get(task_id, StageClassification()).labels(failure)

    @property
    def store_url(self) -> str | None:
        """This pipeline's store, else the cluster default ``[ft_provider] partition_store_url``."""
        if self.store:
            return self.store
        from airflow.sdk import conf

        return conf.get("ft_provider", "partition_store_url", fallback=None) or None

    # -- context manager ----------------------------------------------------------------------------
    def __enter__(self) -> FailoverPipeline:
        dag = current_dag()
        if dag is None:
            raise PipelineWiringError("FailoverPipeline must be used inside a DAG: 'with DAG(...):' first")
        self.dag = dag
        if attached(self.dag) is not None:
            raise PipelineWiringError(
                f"DAG {self.dag.dag_id!r} already has a FailoverPipeline; use one per DAG"
            )
        try:
            # The DAG id names the run's prefix in the partition store: the store's rule, checked now
            # rather than in every stage at run time. Airflow itself also allows '-etl' or 'état'.
            check_name("pipeline name", self.dag.dag_id)
        except ValueError as err:
            raise PipelineWiringError(
                f"DAG id {self.dag.dag_id!r} cannot name a failover pipeline: {err}; rename the DAG "
                "(e.g. 'orders_etl')"
            ) from None
        self._tasks_before = set(self.dag.task_dict)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.build([t for tid, t in self.dag.task_dict.items() if tid not in self._tasks_before])

    # -- building -----------------------------------------------------------------------------------
    def build(self, tasks: list[Task]) -> None:
        declared = [d for d in map(stage_declaration, tasks) if d is not None]
        if not declared:
            raise PipelineWiringError(
                f"FailoverPipeline in DAG {self.dag.dag_id!r} declares no stage operators; create the "
                "SparkStageOperator tasks inside the 'with FailoverPipeline(...):' block"
            )
        self.stages = {d.task_id: d for d in declared}
        self.description = PipelineDescription(
            self.dag.dag_id,
            declared,
            store=self.store,
            aws_conn_id=self.aws_conn_id,
            airflow_api_conn_id=self.airflow_api_conn_id,
            restart_config=self.restart_config,
            per_region_restarts=self.per_region_restarts,
        )
        self.graph = self.description.declared_graph
        tasks_by_id = {t.task_id: t for t in tasks}
        if self.store_url:
            self._refuseown_retry_settings(tasks_by_id)
        self._check_explicit_edges(tasks_by_id)
        if cycle := self.graph.find_cycle():
            raise PipelineWiringError(
                f"the partitions of DAG {self.dag.dag_id!r} form a cycle: {' -> '.join(cycle)}; "
                "a stage cannot (indirectly) consume its own output"
            )
        for consumption in self.graph.consumptions:
            producer = self.graph.results[consumption.result].producer
            tasks_by_id[producer].set_downstream(tasks_by_id[consumption.stage])
        if any(map(is_planner, tasks)):  # stages sized by their inputs (operators/auto_parallelism.py)
            bind_planners(tasks_by_id, self.description)
        self.regions = self.description.declared_regions
        self.stage_connections = {stage: self._spark_connection(tasks_by_id[stage]) for stage in self.stages}
        self._check_pipelined_connections()
        self.checkpoint_configs = checkpoint_configs(
            self.stages, tasks_by_id, pipeline_default=self.checkpointing
        )
        self.data_paths = data_paths(
            self.stages,
            tasks_by_id,
            pipeline=self.data_path,
            checkpointed=self.checkpoint_configs,
            pipeline_checkpointing=self.checkpointing,
        )
        self.failure_classifications = stage_classifications(
            self.stages,
            tasks_by_id,
            pipeline_rules=self.failure_rules,
            pipeline_classifier=self.failure_classifier,
        )
        self.description.check_failover_strategy()
        if self.group_regions:
            self.region_groups = group_regions(self.dag, self.graph, self.regions, tasks_by_id)
        if self.store_url:
            declare_assets(
                self.dag.dag_id, self.store_url, self.aws_conn_id, self.stages.values(), tasks_by_id
            )
            self._install_retry_policy(tasks_by_id)
            self._add_run_end_callbacks()
        attach(self.dag, self)  # how this process's tries, retry policies and callbacks find it

    def _spark_connection(self, task: Task) -> str:
        return str(stage_arguments(task).get("spark_conn_id") or self.spark_conn_id)

    def _add_run_end_callbacks(self) -> None:
        """Release the run's pipelined partitions when it ends (airflow_ft_provider/run_end.py), after
        the author's own DAG callbacks."""
        from airflow_ft_provider.run_end import RunEnd

        for name, succeeded in (("on_success_callback", True), ("on_failure_callback", False)):
            own = getattr(self.dag, name)
            callbacks = [] if own is None else list(own) if isinstance(own, list) else [own]
            setattr(self.dag, name, [*callbacks, RunEnd(self, succeeded=succeeded)])
        request_dag_callbacks(self.dag)

    def _check_pipelined_connections(self) -> None:
        """A pipelined partition lives in one engine (a Spark Connect server keeps it in memory): its
        producer and consumers must run on the same Spark connection."""

        for consumption in self.graph.consumptions:
            result = self.graph.results[consumption.result]
            if result.result_type.is_reconsumable:
                continue
            producer = self.stage_connections[result.producer]
            consumer = self.stage_connections[consumption.stage]
            if producer != consumer:
                raise PipelineWiringError(
                    f"stages {result.producer!r} and {consumption.stage!r} exchange the pipelined result "
                    f"{result.name!r} but run on different Spark connections ({producer!r}, {consumer!r}); a "
                    "pipelined partition lives in one engine for one execution of its region: give both the "
                    "same spark_conn_id, or make the result blocking"
                )

    def _refuseown_retry_settings(self, tasks_by_id: dict[str, Task]) -> None:
        """A stage's own ``retries`` or ``retry_policy`` would be replaced by the restart strategy's
        policy below: refuse them rather than drop them without a word."""
        for stage in self.stages:
            task = tasks_by_id[stage]
            own = own_retry_settings(task)
            if not own:
                continue
            name, value = next(iter(own.items()))
            raise PipelineWiringError(
                f"stage {stage!r} sets {name}={value!r} ({where_set(task, name, value)}), but in a "
                "FailoverPipeline with a partition store the restart strategy decides whether and when a "
                f"stage runs again; remove {name} from the stage (default_args apply to every task: set "
                "it on the tasks that are not stages instead) and configure restarts with restart_strategy=, "
                "e.g. {'restart-strategy.type': 'fixed-delay', 'restart-strategy.fixed-delay.attempts': 3}"
            )

    def _install_retry_policy(self, tasks_by_id: dict[str, Task]) -> None:
        """The restart strategy, not Airflow's retry count, decides when to stop: a policy cannot grant
        more tries than ``retries``, so stages get a budget no strategy will reach. Airflow's own delay
        only applies to the tries the policy never saw (``UNSEEN_TRY_RETRY``)."""
        from airflow_ft_provider.recovery.retry_policy import FailoverRetryPolicy

        settings = {"retry_policy": FailoverRetryPolicy(), "retries": RETRY_BUDGET, **UNSEEN_TRY_RETRY}
        for stage in self.stages:
            set_arguments(tasks_by_id[stage], **settings)

    def _check_explicit_edges(self, tasks_by_id: dict[str, Task]) -> None:
        feeds = {(self.graph.results[c.result].producer, c.stage) for c in self.graph.consumptions}
        for task_id in self.stages:
            for upstream in tasks_by_id[task_id].upstream_task_ids:
                if upstream in self.stages and (upstream, task_id) not in feeds:
                    produced = [r.name for r in self.graph.results.values() if r.producer == upstream]
                    raise PipelineWiringError(
                        f"the edge {upstream} >> {task_id} contradicts the declared partitions: "
                        f"{task_id!r} consumes none of the results of {upstream!r} "
                        f"({produced or 'it produces none'}); declare the input "
                        f"on {task_id!r} or remove the edge (stage dependencies are derived from partitions)"
                    )
