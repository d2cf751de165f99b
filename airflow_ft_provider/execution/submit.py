"""SubmitBackend: each try is one ``spark-submit`` (the Spark provider's SparkSubmitHook)."""

from __future__ import annotations

import os
import sys
import urllib.parse
import zipfile
from pathlib import Path

from airflow_ft_provider.execution.contracts import SparkSubmitter, StageSettings, WrittenOutput
from airflow_ft_provider.failover.indexed_name import IndexedName
from airflow_ft_provider.partitions import S3PartitionStore
from airflow_ft_provider.partitions.provenance import CONTENT
from airflow_ft_provider.safe_json import InvalidJson, load_json_object
from airflow_ft_provider.spark.failure_report import FAILURE_REPORT_CONF, read_report
from airflow_ft_provider.spark.spec import (
    CREDENTIAL_ENV_VARS,
    INJECT_FAILURE_CONF,
    OUTPUT_MARKER,
    SPARK_CONF_KEY,
    OutputSpec,
    StageSpec,
    StoreCredentials,
)


class StageOutputMissing(RuntimeError):
    """The Spark application succeeded but did not write a declared output; nothing is committed."""


def output_missing(stage: StageSettings, result: str) -> StageOutputMissing:
    where = stage.application or getattr(stage.python_callable, "__name__", "the stage's callable")
    return StageOutputMissing(
        f"the Spark application of {stage.task_id!r} finished without writing declared output {result!r}; "
        f"call stage_io.write({result!r}, df) in {where}"
    )


def parse_output_marker(data: bytes, *, where: str) -> WrittenOutput:
    """The marker stage_io wrote beside an output (data from storage: validated); ValueError naming
    ``where`` and the problem if it is not one."""
    try:
        doc = load_json_object(data, max_bytes=64 << 10)
        rows, content = doc["rows"], doc.get("content")
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise ValueError(f"'rows' must be a whole number >= 0, got {rows!r}")
        if content is not None and not (isinstance(content, str) and CONTENT.match(content)):
            raise ValueError(f"'content' must be '<scheme>:<32 hex>' or null, got {content!r}")
    except (InvalidJson, KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"output marker {where} is invalid ({exc}); it is written by stage_io.write: re-run the try"
        ) from None
    return WrittenOutput(rows, content)


def local_dir(uri: str) -> Path:
    return Path(urllib.parse.urlparse(uri).path)


def runtime_zip(directory: Path) -> str:
    """The in-application modules as a --py-files zip, so cluster drivers need no install of ours.
    The same modules give the same bytes (no timestamps): a warm Connect session accepts the artifact
    again only unchanged (``session_slots.py``)."""
    target = directory / "airflow_ft_provider_spark.zip"
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr(_entry("airflow_ft_provider/__init__.py"), "")
        for module in spark_side_modules():
            archive.writestr(_entry(f"airflow_ft_provider/spark/{module.name}"), module.read_bytes())
    return str(target)


def spark_side_modules() -> list[Path]:
    """The modules that run in Spark's driver and executors (``airflow_ft_provider/spark/``)."""
    return sorted((Path(__file__).resolve().parent.parent / "spark").glob("*.py"))


def _entry(name: str) -> zipfile.ZipInfo:
    return zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))


class SubmitBackend:
    """The application runs as its own Spark application; it reports rows in marker files."""

    name = "spark-submit"
    keeps_pipelined = False  # pipelined partitions go through S3 scratch
    server = None  # no engine outlives the application: nothing is kept
    try_session = None  # the driver dies with the try (client mode: see docs/pipelines.md)

    def __init__(
        self,
        stage: StageSettings,
        *,
        conn_id: str,
        workdir: Path,
        store: S3PartitionStore,
        map_index: int | None,
    ) -> None:
        if stage.application is None:
            raise ValueError(
                f"stage {stage.task_id!r} gives python_callable=, which runs only on a Spark Connect "
                "session; "
                f"connection {conn_id!r} is a spark-submit connection: give application= (a PySpark file) or "
                "use a connection of type spark_connect"
            )
        self.hook: SparkSubmitter | None = None  # the try's spark-submit, once it is submitted
        self.stage = stage
        self.conn_id = conn_id
        self.workdir = workdir
        self.store = store
        self.map_index = map_index

    def __enter__(self) -> SubmitBackend:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        pass

    def run(
        self, spec: StageSpec, *, fail_in_app: bool = False, credentials: StoreCredentials | None = None
    ) -> None:
        """``credentials`` reach the driver in its environment (never in the conf, which Spark's UI
        shows, nor on the command line the hook logs); the driver hands them to the executors."""
        stage = self.stage
        extra = dict(stage.spark_submit_kwargs)
        py_files = ",".join(filter(None, [runtime_zip(self.workdir), str(extra.pop("py_files", "") or "")]))
        env = {
            # spark-submit and the driver's Python come from this worker's environment unless set.
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            **stage.env_vars,
        }
        if credentials is not None:
            pair = (credentials.access_key, credentials.secret_key, credentials.session_token or "")
            env.update(zip(CREDENTIAL_ENV_VARS, pair, strict=True))
        report = self.workdir / "driver-failure.json"
        self.hook = stage.spark_hook(
            conf={
                **stage.conf,
                SPARK_CONF_KEY: spec.encode(),
                FAILURE_REPORT_CONF: str(report),
                **({INJECT_FAILURE_CONF: "true"} if fail_in_app else {}),
            },
            conn_id=self.conn_id,
            name=stage.spark_name
            or f"{stage.dag_id}.{IndexedName.from_airflow(stage.task_id, self.map_index)}",
            application_args=[str(a) for a in stage.application_args],
            env_vars=env,
            py_files=py_files,
            **extra,
        )
        try:
            self.hook.submit(stage.application or "")  # a spark-submit stage has one (the pipeline checks)
        except Exception as failure:  # the exit code alone; the driver may have said why
            reported = read_report(str(report))
            if reported is None:
                raise
            raise reported from failure

    def written(self, output: OutputSpec) -> WrittenOutput:
        """From the marker the application wrote beside the output's data (local staging or s3a)."""
        location = output.location
        if location.startswith(("s3a://", "s3://")):
            bucket, key = location.split("://", 1)[1].split("/", 1)
            if bucket != self.store.bucket:
                raise ValueError(f"{location} is not in the partition store's bucket {self.store.bucket}")
            marker = self.store.read_object(key.rstrip("/") + "/" + OUTPUT_MARKER)
        else:
            try:
                marker = (local_dir(location) / OUTPUT_MARKER).read_bytes()
            except FileNotFoundError:
                marker = None
        if marker is None:
            raise output_missing(self.stage, output.result)
        return parse_output_marker(marker, where=f"{location.rstrip('/')}/{OUTPUT_MARKER}")

    def kill(self) -> None:
        if self.hook is not None:
            self.hook.on_kill()

    def view_name(self, partition: str, execution: str) -> str:
        raise TypeError(f"{self.name} keeps no pipelined partition in an engine (keeps_pipelined is False)")

    def held_rows(self, view: str) -> int | None:
        return None

    def drop(self, view: str) -> None:
        pass
