"""One try of a pipeline stage: resolve inputs, run the Spark application, commit its outputs.

Kept apart from ``SparkStageOperator``'s declaration so that parsing a DAG file imports none of it:
the DAG processor imports the operator module again for every parse (bench/bench_parse_cost.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import urllib.parse
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_ft_provider.exchanges import Output
from airflow_ft_provider.faults import injector_for
from airflow_ft_provider.failover.graph import subtask_id
from airflow_ft_provider.partitions import PartitionRef, Producer, RunRef
from airflow_ft_provider.partitions.pipelined import PipelinedPartitions, execution_id
from airflow_ft_provider.partitions.store import new_attempt_id
from airflow_ft_provider.policies.recovery_journal import RecoveryJournal
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


class StageOutputMissing(RuntimeError):
    """The Spark application succeeded but did not write a declared output; nothing is committed."""


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


def _runtime_zip(directory: Path) -> str:
    """The in-application modules as a --py-files zip, so cluster drivers need no install of ours."""
    package = Path(__file__).resolve().parent.parent
    target = directory / "airflow_ft_provider_spark.zip"
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr("airflow_ft_provider/__init__.py", "")
        for module in sorted((package / "spark").glob("*.py")):
            archive.write(module, f"airflow_ft_provider/spark/{module.name}")
    return str(target)


class StageAttempt:
    """The work of one try of ``stage`` (a SparkStageOperator) for one task instance."""

    def __init__(self, stage: Any, context: Any, map_index: int | None) -> None:
        self.stage = stage
        self.ti = context["ti"]
        self.context = context
        self.map_index = map_index
        self.run_ref = RunRef(stage.dag_id, context["run_id"])
        self.description = stage.description
        self.store = stage.store
        self.log = stage.log
        self.hook: Any = None

    def run(self) -> dict[str, Any]:
        """Only after the application succeeds are its outputs committed; a failure commits nothing."""
        stage, ti, run, map_index = self.stage, self.ti, self.run_ref, self.map_index
        task = self.description.core_task_id(stage.task_id, map_index)
        faults = injector_for(self.context, task, store=self.store, run=run, log=self.log)
        faults.before_work()
        direct = stage.pipeline.direct_s3a if stage.direct_s3a is None else stage.direct_s3a
        workdir = Path(tempfile.mkdtemp(prefix="ft-stage-"))
        try:
            inputs = self._resolve_inputs(workdir, direct)
            outputs = self._plan_outputs(workdir, direct)
            spec = StageSpec(
                pipeline=stage.dag_id, run_id=run.run_id, stage=stage.task_id, map_index=map_index,
                try_number=ti.try_number, inputs=inputs, outputs={name: o.spec for name, o in outputs.items()},
            )
            self.log.info("stage %s: reading %s, writing %s", task,
                          {n: [p.partition_id for p in i.partitions] for n, i in inputs.items()} or "nothing",
                          sorted(outputs) or "nothing")
            self._submit(spec, workdir, fail_in_app=faults.fails_in_app)
            faults.after_work()
            committed = self._commit_outputs(outputs)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        ti.xcom_push(key=PARTITIONS_XCOM_KEY, value=committed)
        return committed

    def kill(self) -> None:
        if self.hook is not None:
            self.hook.on_kill()

    def _resolve_inputs(self, workdir: Path, direct: bool) -> dict[str, InputSpec]:
        """Resolve and verify every input partition before any Spark work: PartitionNotFound names it.
        Staged: fetched to local disk (checksums verified). Direct: s3a URIs of the manifest's objects.
        A pipelined input is read from the execution its handle names, if that execution is current."""
        inputs: dict[str, InputSpec] = {}
        graph = self.description.graph
        consumed = self.description.consumed_partitions(self.stage.task_id, self.map_index)
        pipelined_io = PipelinedPartitions(self.store)
        journal_state = None
        for result, partition_ids in consumed.items():
            producer = graph.stages[graph.results[result].producer]
            pipelined = not graph.results[result].result_type.is_reconsumable
            if pipelined and journal_state is None:
                journal_state = RecoveryJournal(self.store, self.run_ref).load()
            partitions = []
            for number, partition_id in enumerate(partition_ids):
                ref = self.run_ref.parse(partition_id)
                handle = None
                if pipelined:
                    index = max(ref.map_index, 0)
                    producer_task = subtask_id(producer.name, index, producer.parallelism)
                    handle = pipelined_io.resolve(ref, ended_through=journal_state.ended_through(producer_task))
                if direct:
                    _, uris = (pipelined_io.remote_files(ref, handle) if handle is not None else self.store.remote_files(ref))
                    paths = [uri.replace("s3://", "s3a://", 1) for uri in uris]
                else:
                    # Not the partition id: '[' is a glob character in Hadoop paths.
                    dest = workdir / "in" / f"{result}-{number}"
                    fetched = pipelined_io.fetch(ref, handle, dest) if handle is not None else self.store.fetch(ref, dest)
                    paths = [p.as_uri() for p in fetched.paths]
                partitions.append(InputPartition(partition_id, paths))
            inputs[result] = InputSpec(result, "pipelined" if pipelined else "blocking", partitions)
        return inputs

    def _plan_outputs(self, workdir: Path, direct: bool) -> dict[str, _PlannedOutput]:
        """Where the application writes each output: local staging, or the attempt prefix on S3."""
        parallelism = self.description.graph.stages[self.stage.task_id].parallelism
        try_number = self.ti.try_number
        planned = {}
        for output in self.stage.outputs:
            partition_id = output.result if parallelism == 1 else f"{output.result}[{self.map_index}]"
            ref = self.run_ref.parse(partition_id)
            pipelined = not output.result_type.is_reconsumable
            attempt = new_attempt_id(try_number) if direct else None
            if not direct:
                location = (workdir / "out" / output.result).as_uri()
            elif pipelined:
                location = PipelinedPartitions(self.store).attempt_location(ref, attempt, try_number)
            else:
                location = self.store.attempt_location(ref, attempt)
            spec = OutputSpec(output.result, output.result_type.value, location.replace("s3://", "s3a://", 1),
                              compression=output.compression)
            execution = execution_id(try_number) if pipelined else None
            planned[output.result] = _PlannedOutput(output, partition_id, ref, spec, execution, attempt)
        return planned

    def _submit(self, spec: StageSpec, workdir: Path, *, fail_in_app: bool = False) -> None:
        stage = self.stage
        extra = dict(stage.spark_submit_kwargs)
        py_files = ",".join(filter(None, [_runtime_zip(workdir), extra.pop("py_files", None)]))
        env = {
            # spark-submit and the driver's Python come from this worker's environment unless set.
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            **stage.env_vars,
        }
        index = "" if self.map_index is None else f"[{self.map_index}]"
        self.hook = stage.spark_hook(
            conf={**stage.conf, SPARK_CONF_KEY: spec.encode(), **({INJECT_FAILURE_CONF: "true"} if fail_in_app else {})},
            conn_id=stage.spark_conn_id or stage.pipeline.spark_conn_id,
            name=stage.spark_name or f"{stage.dag_id}.{stage.task_id}{index}",
            application_args=[str(a) for a in stage.application_args],
            env_vars=env,
            py_files=py_files,
            **extra,
        )
        self.hook.submit(stage.application)

    def _commit_outputs(self, outputs: dict[str, _PlannedOutput]) -> dict[str, Any]:
        """Commit each declared output; all must have been written before the first is committed."""
        markers = {name: self._read_marker(planned) for name, planned in outputs.items()}
        committed: dict[str, Any] = {}
        producer = Producer(self.stage.task_id, -1 if self.map_index is None else self.map_index, self.ti.try_number)
        for name, planned in outputs.items():
            rows = markers[name]["rows"]
            options = {"producer": producer, "compression": planned.output.compression, "row_count": rows}
            pipelined_io = PipelinedPartitions(self.store)
            if planned.execution is None and planned.attempt is None:
                manifest = self.store.commit(planned.ref, _local_dir(planned.spec.location), **options)
            elif planned.execution is None:
                manifest = self.store.commit_uploaded(planned.ref, planned.attempt, **options)
            elif planned.attempt is None:
                manifest = pipelined_io.commit(planned.ref, _local_dir(planned.spec.location), **options)
            else:
                manifest = pipelined_io.commit_uploaded(planned.ref, planned.attempt, **options)
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
                f"the Spark application of {self.stage.task_id!r} finished without writing declared output "
                f"{planned.output.result!r}; call stage_io.write({planned.output.result!r}, df) in "
                f"{self.stage.application}"
            ) from None
