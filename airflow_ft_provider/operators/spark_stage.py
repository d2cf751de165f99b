"""SparkStageOperator: one Spark batch stage of a FailoverPipeline, as an Airflow task."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import zipfile
from dataclasses import dataclass
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator, BaseOperatorLink

from airflow_ft_provider.exchanges import Output, normalize_inputs, normalize_outputs
from airflow_ft_provider.faults import InjectedFailure, delete_partitions, faults_for, kill_self
from airflow_ft_provider.partitions import PartitionRef, Producer, RunRef
from airflow_ft_provider.partitions.store import new_attempt_id
from airflow_ft_provider.policies.recovery_journal import STORE_XCOM_KEY
from airflow_ft_provider.spark.spec import (
    INJECT_FAILURE_CONF,
    OUTPUT_MARKER,
    SPARK_CONF_KEY,
    InputPartition,
    InputSpec,
    OutputSpec,
    StageSpec,
)

PARTITIONS_XCOM_KEY = "ft_partitions"
FAILOVER_UI_PREFIX = "/ft-failover"  # where the UI plugin's FastAPI app is mounted
# Shorter restart waits are slept in the worker: a deferral costs seconds by itself, and when the
# triggerer resumes a task within a few seconds, Airflow 3.3's scheduler may process the deferring
# process's exit event after the resume and fail the running try ("finished with state success, but
# the task instance's state attribute is running"), seen on a loaded 2-core machine.
MIN_DEFERRAL_SECONDS = 5.0


@dataclass(frozen=True)
class _PlannedOutput:
    output: Output
    partition_id: str
    ref: PartitionRef
    spec: OutputSpec
    execution: str | None  # pipelined: the execution whose scratch it is
    attempt: str | None  # direct s3a: the attempt prefix Spark writes into


def _local_dir(uri: str) -> Path:
    return Path(urllib.parse.urlparse(uri).path)


class StageOutputMissing(RuntimeError):
    """The Spark application succeeded but did not write a declared output; nothing is committed."""


def failover_page_url(dag_id: str, run_id: str, *, task: str | None = None, section: str = "") -> str:
    """The UI plugin's page of a run (relative to the API server, under ``[api] base_url``'s path)."""
    from airflow.sdk import conf

    base = urllib.parse.urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    path = f"{base}{FAILOVER_UI_PREFIX}/runs/{urllib.parse.quote(dag_id, safe='')}/{urllib.parse.quote(run_id, safe='')}"
    query = f"?{urllib.parse.urlencode({'task': task})}" if task else ""
    return f"{path}{query}{'#' + section if section else ''}"


def _core_task(ti_key) -> str:
    return ti_key.task_id if ti_key.map_index is None or ti_key.map_index < 0 else f"{ti_key.task_id}[{ti_key.map_index}]"


class RegionLink(BaseOperatorLink):
    """Extra link from a stage's task instance to its failover region on the run's failover page."""

    name = "Failover region"

    def get_link(self, operator: BaseOperator, *, ti_key) -> str:
        return failover_page_url(ti_key.dag_id, ti_key.run_id, task=_core_task(ti_key), section="regions")


class PartitionsLink(BaseOperatorLink):
    """Extra link from a stage's task instance to the partitions of its run on the failover page."""

    name = "Partitions"

    def get_link(self, operator: BaseOperator, *, ti_key) -> str:
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
            f"define it, e.g. AIRFLOW_CONN_{conn_id.upper()}='{{\"conn_type\": \"spark\", \"host\": \"local[*]\"}}' "
            "or spark://host:7077, or pass spark_conn_id= to the pipeline or the stage"
        ) from None


def _runtime_zip(directory: Path) -> str:
    """The in-application modules as a --py-files zip, so cluster drivers need no install of ours."""
    package = Path(__file__).resolve().parent.parent
    target = directory / "airflow_ft_provider_spark.zip"
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr("airflow_ft_provider/__init__.py", "")
        for module in sorted((package / "spark").glob("*.py")):
            archive.write(module, f"airflow_ft_provider/spark/{module.name}")
    return str(target)


class SparkStageOperator(BaseOperator):
    """Run a PySpark application that reads and writes result partitions.

    Before submitting, every input partition this task reads is resolved through its manifest and
    verified; a missing or corrupt one raises ``PartitionNotFound`` (which drives backtracking).
    The application is submitted with the Spark provider's ``SparkSubmitHook`` (master from the
    ``spark`` connection). Only after it succeeds are its outputs committed to the partition store;
    a failed application commits nothing.

    :param application: the PySpark file to run (templated); it uses ``airflow_ft_provider.spark.stage_io``.
    :param inputs: results read, e.g. ``["raw"]`` or ``{"raw": "pointwise"}`` (default all-to-all).
    :param outputs: results written, e.g. ``["cleaned"]`` or ``{"enriched": "pipelined"}`` (default blocking).
    :param application_args: arguments for the application (templated).
    :param conf: extra Spark configuration (templated).
    :param env_vars: environment of spark-submit (templated).
    :param spark_name: Spark application name (templated); default ``<dag>.<task>[<map index>]``.
    :param spark_conn_id: ``spark`` connection; default: the pipeline's (``spark_default``).
    :param spark_submit_kwargs: further ``SparkSubmitHook`` arguments (executor_memory, jars, ...).
    :param direct_s3a: Spark reads and writes partitions on S3 itself (``s3a://``; the cluster needs
        hadoop-aws); default: the pipeline's (False: the worker stages partitions on local disk).
    """

    is_pipeline_stage = True
    template_fields: Sequence[str] = ("application", "application_args", "conf", "env_vars", "spark_name")
    template_fields_renderers = {"conf": "json", "env_vars": "json"}
    operator_extra_links = (RegionLink(), PartitionsLink())
    ui_color = "#fbe3c2"

    def __init__(
        self,
        *,
        application: str,
        inputs: object = None,
        outputs: object = None,
        application_args: list[Any] | None = None,
        conf: dict[str, Any] | None = None,
        env_vars: dict[str, str] | None = None,
        spark_name: str | None = None,
        spark_conn_id: str | None = None,
        spark_submit_kwargs: dict[str, Any] | None = None,
        direct_s3a: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.direct_s3a = direct_s3a
        self.application = application
        self.inputs = normalize_inputs(inputs)
        self.outputs = normalize_outputs(outputs)
        self.application_args = application_args or []
        self.conf = conf or {}
        self.env_vars = env_vars or {}
        self.spark_name = spark_name
        self.spark_conn_id = spark_conn_id
        self.spark_submit_kwargs = spark_submit_kwargs or {}
        self._hook: Any = None

    # -- collaborators ------------------------------------------------------------------------------
    @cached_property
    def pipeline(self):
        from airflow_ft_provider.pipeline import pipeline_for

        return pipeline_for(self.dag_id)

    @cached_property
    def description(self):
        return self.pipeline.description

    @cached_property
    def store(self):
        return self.description.partition_store()

    def _spark_hook(self, **kwargs: Any):
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        check_spark_connection(kwargs["conn_id"])
        return SparkSubmitHook(**kwargs)

    # -- execution ----------------------------------------------------------------------------------
    def execute(self, context: Any, event: Any = None) -> dict[str, Any]:
        ti = context["ti"]
        map_index = ti.map_index if ti.map_index is not None and ti.map_index >= 0 else None
        if self.pipeline.store_url:
            self._wait_for_restart_time(context, map_index, resumed=event is not None)
        run = RunRef(self.dag_id, context["run_id"])
        task = self.description.core_task_id(self.task_id, map_index)
        faults = [f for f in faults_for(context, task) if ti.try_number <= f.times]
        for fault in faults:
            delete_partitions(self.store, run, fault.delete, self.log)
            delete_partitions(self.store, run, fault.truncate, self.log, truncate=True)
            if fault.mode == "raise":
                raise InjectedFailure(f"injected failure of {task} on try {ti.try_number} (ft_faults)")
        direct = self.pipeline.direct_s3a if self.direct_s3a is None else self.direct_s3a
        workdir = Path(tempfile.mkdtemp(prefix="ft-stage-"))
        try:
            inputs = self._resolve_inputs(run, map_index, ti, workdir, direct)
            outputs = self._plan_outputs(run, map_index, ti.try_number, workdir, direct)
            spec = StageSpec(
                pipeline=self.dag_id, run_id=run.run_id, stage=self.task_id, map_index=map_index,
                try_number=ti.try_number, inputs=inputs, outputs={name: o.spec for name, o in outputs.items()},
            )
            self.log.info("stage %s: reading %s, writing %s", task,
                          {n: [p.partition_id for p in i.partitions] for n, i in inputs.items()} or "nothing",
                          sorted(outputs) or "nothing")
            self._submit(spec, map_index, workdir, fail_in_app=any(f.mode == "app" for f in faults))
            if any(f.mode == "kill" for f in faults):
                kill_self()  # a hard crash after the work, before the commit
            committed = self._commit_outputs(run, map_index, ti.try_number, outputs)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        ti.xcom_push(key=PARTITIONS_XCOM_KEY, value=committed)
        return committed

    def _wait_for_restart_time(self, context: Any, map_index: int | None, *, resumed: bool) -> None:
        """A restarted task waits for its region's restart time deferred, without holding a worker slot."""
        ti = context["ti"]
        failover = self.description.region_failover(context["run_id"])
        if not resumed:  # once per try: a resumed deferral is the same try, its XCom and S3 copy stand
            failover.journal.save_description(self.description)  # for the UI plugin and airflow-ft
            ti.xcom_push(key=STORE_XCOM_KEY, value=failover.journal.store_pointer(self.description.aws_conn_id))
        restart_at = failover.before_work(self.task_id, map_index, ti.try_number)
        if restart_at is None:
            return
        from datetime import datetime, timezone

        from airflow.providers.standard.triggers.temporal import DateTimeTrigger

        if restart_at == float("inf"):  # cleared: wait to be rescheduled after the producers re-ran
            restart_at = time.time() + 3600
        moment = datetime.fromtimestamp(restart_at, tz=timezone.utc)
        wait = restart_at - time.time()
        self.log.info("region failover: waiting %.1f s, until %s (restart strategy backoff), %s", wait,
                      moment.isoformat(), "deferred" if wait >= MIN_DEFERRAL_SECONDS else "in the worker")
        if wait < MIN_DEFERRAL_SECONDS:
            time.sleep(max(0.0, wait))
            return
        self.defer(trigger=DateTimeTrigger(moment=moment), method_name="execute")

    def _resolve_inputs(
        self, run: RunRef, map_index: int | None, ti: Any, workdir: Path, direct: bool
    ) -> dict[str, InputSpec]:
        """Resolve and verify every input partition before any Spark work: PartitionNotFound names it.
        Staged: fetched to local disk (checksums verified). Direct: s3a URIs of the manifest's objects."""
        inputs: dict[str, InputSpec] = {}
        for result, partition_ids in self.description.consumed_partitions(self.task_id, map_index).items():
            producer = self.description.graph.results[result].producer
            pipelined = not self.description.graph.results[result].result_type.is_reconsumable
            executions = self._pipelined_executions(ti, producer) if pipelined else {}
            partitions = []
            for number, partition_id in enumerate(partition_ids):
                ref = run.parse(partition_id)
                execution = executions.get(partition_id, "t0") if pipelined else None
                if direct:
                    _, uris = self.store.remote_files(ref, execution_id=execution)
                    paths = [uri.replace("s3://", "s3a://", 1) for uri in uris]
                else:
                    # Not the partition id: '[' is a glob character in Hadoop paths.
                    dest = workdir / "in" / f"{result}-{number}"
                    fetched = (self.store.fetch_scratch(ref, execution, dest) if pipelined
                               else self.store.fetch(ref, dest))
                    paths = [p.as_uri() for p in fetched.paths]
                partitions.append(InputPartition(partition_id, paths))
            inputs[result] = InputSpec(result, "pipelined" if pipelined else "blocking", partitions)
        return inputs

    def _plan_outputs(
        self, run: RunRef, map_index: int | None, try_number: int, workdir: Path, direct: bool
    ) -> dict[str, _PlannedOutput]:
        """Where the application writes each output: local staging, or the attempt prefix on S3."""
        parallelism = self.description.graph.stages[self.task_id].parallelism
        planned = {}
        for output in self.outputs:
            partition_id = output.result if parallelism == 1 else f"{output.result}[{map_index}]"
            ref = run.parse(partition_id)
            execution = None if output.result_type.is_reconsumable else f"t{try_number}"
            attempt = new_attempt_id(try_number) if direct else None
            location = (self.store.attempt_location(ref, attempt, execution_id=execution).replace("s3://", "s3a://", 1)
                        if direct else (workdir / "out" / output.result).as_uri())
            spec = OutputSpec(output.result, output.result_type.value, location, compression=output.compression)
            planned[output.result] = _PlannedOutput(output, partition_id, ref, spec, execution, attempt)
        return planned

    def _pipelined_executions(self, ti: Any, producer: str) -> dict[str, str]:
        """A pipelined partition is read from the producer's current execution, named in its XCom."""
        pulled = ti.xcom_pull(task_ids=producer, key=PARTITIONS_XCOM_KEY, map_indexes=None)
        entries = pulled if isinstance(pulled, list) else [pulled]
        return {
            pid: info["execution"]
            for entry in entries if isinstance(entry, dict)
            for pid, info in entry.items() if info.get("type") == "pipelined"
        }

    def _submit(self, spec: StageSpec, map_index: int | None, workdir: Path, *, fail_in_app: bool = False) -> None:
        extra = dict(self.spark_submit_kwargs)
        py_files = ",".join(filter(None, [_runtime_zip(workdir), extra.pop("py_files", None)]))
        env = {
            # spark-submit and the driver's Python come from this worker's environment unless set.
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            **self.env_vars,
        }
        index = "" if map_index is None else f"[{map_index}]"
        self._hook = self._spark_hook(
            conf={**self.conf, SPARK_CONF_KEY: spec.encode(), **({INJECT_FAILURE_CONF: "true"} if fail_in_app else {})},
            conn_id=self.spark_conn_id or self.pipeline.spark_conn_id,
            name=self.spark_name or f"{self.dag_id}.{self.task_id}{index}",
            application_args=[str(a) for a in self.application_args],
            env_vars=env,
            py_files=py_files,
            **extra,
        )
        self._hook.submit(self.application)

    def _commit_outputs(
        self, run: RunRef, map_index: int | None, try_number: int, outputs: dict[str, _PlannedOutput]
    ) -> dict[str, Any]:
        """Commit each declared output; all must have been written before the first is committed."""
        markers = {name: self._read_marker(planned) for name, planned in outputs.items()}
        committed: dict[str, Any] = {}
        producer = Producer(self.task_id, -1 if map_index is None else map_index, try_number)
        for name, planned in outputs.items():
            rows = markers[name]["rows"]
            options = {"producer": producer, "compression": planned.output.compression, "row_count": rows}
            if planned.attempt is not None:
                manifest = self.store.commit_uploaded(planned.ref, planned.attempt, execution_id=planned.execution, **options)
            elif planned.execution is None:
                manifest = self.store.commit(planned.ref, _local_dir(planned.spec.location), **options)
            else:
                manifest = self.store.commit_scratch(planned.ref, planned.execution, _local_dir(planned.spec.location),
                                                     **options)
            self.log.info("committed %s partition %s: %d rows, %d files, %d bytes (attempt %s)",
                          planned.output.result_type.value, planned.partition_id, rows, len(manifest.files),
                          manifest.total_size, manifest.attempt_id)
            committed[planned.partition_id] = {
                "type": planned.output.result_type.value, "rows": rows, "files": len(manifest.files),
                "bytes": manifest.total_size, "attempt": manifest.attempt_id, "execution": planned.execution,
            }
        return committed

    def _read_marker(self, planned: _PlannedOutput) -> dict[str, Any]:
        location = planned.spec.location
        try:
            if location.startswith("s3a://"):
                bucket, key = location.removeprefix("s3a://").split("/", 1)
                body = self.store.client.get_object(Bucket=bucket, Key=key.rstrip("/") + "/" + OUTPUT_MARKER)["Body"]
                return json.loads(body.read())
            return json.loads((_local_dir(location) / OUTPUT_MARKER).read_text())
        except (FileNotFoundError, self.store.client.exceptions.NoSuchKey):
            raise StageOutputMissing(
                f"the Spark application of {self.task_id!r} finished without writing declared output "
                f"{planned.output.result!r}; call stage_io.write({planned.output.result!r}, df) in {self.application}"
            ) from None

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()
