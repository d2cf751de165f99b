"""SparkStageOperator: one Spark batch stage of a FailoverPipeline, as an Airflow task."""

from __future__ import annotations

import os
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, BaseOperatorLink

from airflow_ft_provider.failover.indexed_name import IndexedName
from airflow_ft_provider.model.exchanges import normalize_inputs, normalize_outputs
from airflow_ft_provider.model.reuse_scope import ReuseScope

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context
    from airflow.sdk.types import TaskInstanceKey

    from airflow_ft_provider.failover.classification import FailureRules
    from airflow_ft_provider.model.description import PipelineDescription
    from airflow_ft_provider.partitions import S3PartitionStore
    from airflow_ft_provider.pipeline import FailoverPipeline
    from airflow_ft_provider.stage_try.attempt import StageTry

FAILOVER_UI_PREFIX = "/ft-failover"  # where the UI plugin's FastAPI app is mounted


def failover_page_url(dag_id: str, run_id: str, *, task: str | None = None, section: str = "") -> str:
    """The UI plugin's page of a run (relative to the API server, under ``[api] base_url``'s path)."""
    from airflow.sdk import conf

    base = urllib.parse.urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    path = (
        f"{base}{FAILOVER_UI_PREFIX}/runs/{urllib.parse.quote(dag_id, safe='')}"
        f"/{urllib.parse.quote(run_id, safe='')}"
    )
    query = f"?{urllib.parse.urlencode({'task': task})}" if task else ""
    return f"{path}{query}{'#' + section if section else ''}"


def _core_task(ti_key: TaskInstanceKey) -> str:
    return str(IndexedName.from_airflow(ti_key.task_id, ti_key.map_index))


class RegionLink(BaseOperatorLink):
    """Extra link from a stage's task instance to its failover region on the run's failover page."""

    name = "Failover region"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return failover_page_url(ti_key.dag_id, ti_key.run_id, task=_core_task(ti_key), section="regions")


class PartitionsLink(BaseOperatorLink):
    """Extra link from a stage's task instance to the partitions of its run on the failover page."""

    name = "Partitions"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return failover_page_url(ti_key.dag_id, ti_key.run_id, task=_core_task(ti_key), section="partitions")


class SparkConnectionMissing(ValueError):
    """The stage's ``spark`` connection is not defined; nothing is submitted."""


def check_spark_connection(conn_id: str) -> None:
    """SparkSubmitHook treats an undefined connection as ``--master yarn``: refuse that instead."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise SparkConnectionMissing(
            f"spark connection {conn_id!r} is not defined (SparkSubmitHook would silently submit to YARN); "
            f"define it, e.g. AIRFLOW_CONN_{conn_id.upper()}="
            '\'{"conn_type": "spark", "host": "local[*]"}\' '
            "or spark://host:7077, or pass spark_conn_id= to the pipeline or the stage"
        ) from None


class SparkStageOperator(BaseOperator):
    """Run a PySpark application that reads and writes result partitions.

    Before any Spark work, every input partition this task reads is resolved through its manifest (or
    handle) and verified; a missing or corrupt one raises ``PartitionNotFound`` (which drives
    backtracking). With a ``spark`` connection the application is submitted with the Spark provider's
    ``SparkSubmitHook``; with a ``spark_connect`` connection it runs in the worker on a session of the
    Spark Connect server, and pipelined outputs stay in that server. Only after the application
    succeeds are its outputs committed to the partition store; a failed application commits nothing.

    :param application: the PySpark file to run (templated); it uses ``airflow_ft_provider.spark.stage_io``.
        A relative path is taken from the DAG file's folder (``jobs/clean.py`` beside ``dags/etl.py``).
    :param python_callable: instead of ``application`` (Spark Connect only):
        ``fn(spark, io, *application_args)`` gets the session and the stage's ``StageIO``.
    :param inputs: results read, e.g. ``["raw"]`` or ``{"raw": "pointwise"}`` (default all-to-all).
    :param outputs: results written, e.g. ``["cleaned"]`` or ``{"enriched": "pipelined"}`` (default blocking).
    :param application_args: arguments for the application (templated).
    :param conf: extra Spark configuration (templated).
    :param env_vars: environment of spark-submit (templated).
    :param spark_name: Spark application name (templated); default ``<dag>.<task>[<map index>]``.
    :param spark_conn_id: ``spark`` (spark-submit) or ``spark_connect`` connection; default: the
        pipeline's (``spark_default``).
    :param spark_submit_kwargs: further ``SparkSubmitHook`` arguments (executor_memory, jars, ...).
    :param data_path: where partition data flows (``model/data_path.py``): ``"executors"`` (Spark's
        executors read and write S3 themselves), ``"staged"`` (through the worker's disk) or ``"s3a"``
        (Spark's s3a connector); default: the pipeline's (``[ft_provider] data_path``, ``"executors"``).
    :param checkpointing: a checkpointed stage (``io.read_stream`` / ``io.write_stream``): ``True``, or a
        dict of ``execution.checkpointing.*`` keys over the pipeline's; ``False`` turns off the
        pipeline's default; None (default): the pipeline's ``checkpointing=``.
    :param reuse: where a try whose inputs hold the same rows and whose code and settings are unchanged
        takes its outputs from instead of running Spark (docs, *Reusing unchanged outputs*):
        ``"within-run"`` its task's earlier try, ``"across-runs"`` also an earlier run kept in the store
        (opt-in), ``"off"`` nowhere (an application with effects beyond its outputs: writes elsewhere,
        sends messages). Default: the pipeline's ``reuse=`` (``"within-run"``).
    """

    is_pipeline_stage = True
    template_fields: Sequence[str] = ("application", "application_args", "conf", "env_vars", "spark_name")
    template_fields_renderers = {"conf": "json", "env_vars": "json"}
    operator_extra_links = (RegionLink(), PartitionsLink())
    ui_color = "#fbe3c2"

    def __init__(
        self,
        *,
        application: str | None = None,
        python_callable: Callable[..., Any] | None = None,
        inputs: object = None,
        outputs: object = None,
        application_args: list[Any] | None = None,
        conf: dict[str, Any] | None = None,
        env_vars: dict[str, str] | None = None,
        spark_name: str | None = None,
        spark_conn_id: str | None = None,
        spark_submit_kwargs: dict[str, Any] | None = None,
        data_path: str | None = None,
        checkpointing: bool | dict[str, object] | None = None,
        failure_rules: FailureRules | Mapping[str, object] | None = None,
        failure_classifier: Callable[[BaseException], bool | None] | None = None,
        reuse: ReuseScope | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (application is None) == (python_callable is None):
            raise ValueError(
                f"stage {self.task_id!r}: give either application= (a PySpark file) or python_callable= "
                f"(a function of the Spark Connect session and the stage's I/O), not "
                f"{'both' if application is not None else 'neither'}"
            )
        if python_callable is not None and not callable(python_callable):
            raise ValueError(
                f"stage {self.task_id!r}: python_callable must be callable, got {python_callable!r}"
            )
        self.reuse = None if reuse is None else ReuseScope.parse(reuse, where=f"stage {self.task_id!r}")
        self.data_path = data_path  # checked by FailoverPipeline
        self.checkpointing = checkpointing
        self.failure_rules = failure_rules  # checked by FailoverPipeline (recovery/failure_facts.py)
        self.failure_classifier = failure_classifier
        self.application = application
        self.python_callable = python_callable
        self.inputs = normalize_inputs(inputs)
        self.outputs = normalize_outputs(outputs)
        self.application_args = application_args or []
        self.conf = conf or {}
        self.env_vars = env_vars or {}
        self.spark_name = spark_name
        self.spark_conn_id = spark_conn_id
        self.spark_submit_kwargs = spark_submit_kwargs or {}
        self._attempt: StageTry | None = None  # the running try: for on_kill, then for its lineage
        self._started_at = 0.0

    # -- collaborators ------------------------------------------------------------------------------
    @cached_property
    def pipeline(self) -> FailoverPipeline:
        from airflow_ft_provider.pipeline import pipeline_of

        return pipeline_of(self.dag)

    @cached_property
    def description(self) -> PipelineDescription:
        if (description := self.pipeline.description) is None:  # built when the pipeline's block closes
            raise RuntimeError(f"stage {self.task_id!r}: its FailoverPipeline block did not complete")
        return description

    @cached_property
    def store(self) -> S3PartitionStore:
        from airflow_ft_provider.hooks.partition_store import pipeline_store

        return pipeline_store(self.description)

    def spark_hook(self, **kwargs: Any) -> SparkSubmitHook:
        """The SparkSubmitHook a try submits with (a seam: tests wrap it)."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        check_spark_connection(kwargs["conn_id"])
        return SparkSubmitHook(**kwargs)

    # -- execution ----------------------------------------------------------------------------------
    def execute(self, context: Context, event: object = None) -> dict[str, Any]:
        # Imported here: a DAG parse needs none of a try's machinery (bench/bench_parse_cost.py).
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_ft_provider import metrics
        from airflow_ft_provider.faults import faults_for
        from airflow_ft_provider.lineage import spark_parent_job_conf
        from airflow_ft_provider.model.map_counts import pending_names
        from airflow_ft_provider.operators.try_gate import check_map_counts, enter_try
        from airflow_ft_provider.recovery.retry_policy import record_failure_without_retry
        from airflow_ft_provider.stage_try.attempt import StageTry
        from airflow_ft_provider.stage_try.entries import PARTITIONS_XCOM_KEY, as_xcom
        from airflow_ft_provider.stage_try.phases import TryPhases
        from airflow_ft_provider.stage_try.scope import StageSnapshot, TryScope

        ti = context["ti"]
        started_at = time.time()  # after it: failover decisions this try does not answer (lineage.py)
        map_index = ti.map_index if ti.map_index is not None and ti.map_index >= 0 else None
        phases = TryPhases()
        description = self.description  # as the run runs it: with its run-time map counts
        if self.pipeline.store_url:
            with phases.phase("gate"):  # a deferral leaves here: the resumed try starts a new clock
                description = enter_try(self, context, map_index, resumed=event is not None)
        stage = StageSnapshot(  # the operator's settings, as this try runs them
            task_id=self.task_id,
            dag_id=self.dag_id,
            spark_name=self.spark_name,
            spark_conn_id=self.spark_conn_id,
            application=self.resolved_application(),
            python_callable=self.python_callable,
            application_args=list(self.application_args),
            outputs=self.outputs,
            reuse=self.reuse,
            description=description,
            conf=spark_parent_job_conf(self.conf, context),
            store=self.store,
            pipeline=self.pipeline,
            log=self.log,
            env_vars=dict(self.env_vars),
            spark_hook=self.spark_hook,
            spark_submit_kwargs=dict(self.spark_submit_kwargs),
        )
        scope = TryScope.of(
            stage, context["run_id"], map_index, ti.try_number, context.get("task_state_store")
        )
        graph = scope.description.graph
        later = pending_names(description.declared_graph, description.pending)  # not expanded yet
        faults = faults_for(
            context, scope.task, graph=graph, store=scope.store, run=scope.run, log=scope.log, later=later
        )
        attempt = StageTry(scope, faults, phases)
        self._attempt, self._started_at = attempt, started_at
        try:
            check_map_counts(description, self.task_id)
            committed = as_xcom(attempt.run())
        except AirflowFailException as failure:  # Airflow fails it without asking the retry policy
            if self.pipeline.store_url:
                record_failure_without_retry(context, failure)
            raise
        finally:
            self.log.info("%s", phases.summary())
            metrics.try_phases(phases.seconds, dag_id=scope.stage.dag_id, task_id=scope.task)
        ti.xcom_push(key=PARTITIONS_XCOM_KEY, value=committed)
        return committed

    def resolved_application(self) -> str | None:
        """``application`` with a relative path taken from the DAG file's folder (where a DAG folder
        ships its jobs), not from the worker's working directory, an accident of how it was started.
        URIs (``local:``, ``s3a://``, ``hdfs://``) and absolute paths are left as they are."""
        app = self.application
        if app is None or os.path.isabs(app) or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", app):
            return app
        fileloc = getattr(self.dag, "fileloc", None) if self.has_dag() else None
        if not fileloc:
            return app
        path = os.path.join(os.path.dirname(os.path.abspath(fileloc)), app)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"stage {self.task_id!r}: application {app!r} is not a file beside the DAG file ({path}); "
                "a relative application path is resolved against the DAG file's folder: fix the path, or "
                "give an absolute one"
            )
        return path

    def on_kill(self) -> None:
        if self._attempt is not None:
            self._attempt.kill()

    # -- OpenLineage (Airflow's openlineage provider calls these when it is installed and configured) --
    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage | None:
        """The partitions this try read and committed, and why it ran (``lineage.py``); None: no work
        started (a superseded try)."""
        from airflow_ft_provider.lineage import lineage_of_try

        attempt, started_at = self._attempt, self._started_at
        return None if attempt is None else lineage_of_try(attempt, task_instance, started_at=started_at)

    get_openlineage_facets_on_failure = get_openlineage_facets_on_complete
