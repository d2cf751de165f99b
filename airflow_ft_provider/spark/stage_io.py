"""Partition I/O inside a PySpark application started by ``SparkStageOperator``.

    from airflow_ft_provider.spark import stage_io

    io = stage_io.for_session(spark)
    orders = io.read("cleaned_orders")          # a declared input, as a DataFrame
    io.write("daily_revenue", revenue_df)       # a declared output, written once

The application only writes data and reports how many rows, with a checksum of the rows (``content.py``,
so that a consumer re-run on unchanged inputs can reuse its output); the operator commits the partition
through the store afterwards (one manifest PUT), so a crashed application never exposes output.
Reading an input that is not declared, or writing an output twice, is an error.

The same application runs two ways. Under ``spark-submit`` the spec comes from the Spark conf and each
output's row count goes into a small marker file beside its data. On a Spark Connect session the
application runs in the Airflow worker itself: the operator installs the spec in this process
(``in_process_stage``) and reads the row counts back from it; pipelined outputs may then stay in the
Spark server as cached global temporary views instead of files.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from .carried import carried_rows
from .content import ContentObserver, rows_in_footers
from .failure_report import FAILURE_REPORT_CONF, InjectedFailure, injected_in_batch, report_uncaught
from .feed import Feeder, feed_until_done, staged_feeder
from .in_process import InProcessStage
from .sink_log import remove_uncommitted
from .spec import (
    ENV_VAR,
    INJECT_FAILURE_CONF,
    OUTPUT_MARKER,
    SPARK_CONF_KEY,
    VIEW_PREFIX,
    CheckpointSpec,
    InputSpec,
    OutputSpec,
    StageSpec,
    StoreCredentials,
)
from .stage_errors import StageIOError
from .stream_sink import (
    CHANGELOG_CONF,
    OUTPUT_MODES,
    ROCKSDB_PROVIDER,
    STATE_STORE_CONF,
    latest_batch_writer,
)
from .stream_start import start_stream
from .written import write_local_marker

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .executor_io import ExecutorIO


_current: InProcessStage | None = None


@contextmanager
def in_process_stage(
    spec: StageSpec, *, fail_before_write: bool = False, credentials: StoreCredentials | None = None
) -> Iterator[InProcessStage]:
    """Make ``for_session`` serve ``spec`` to an application run in this process (Spark Connect)."""
    global _current
    if _current is not None:
        raise StageIOError(f"a stage ({_current.spec.stage!r}) is already running in this process")
    _current = InProcessStage(spec, fail_before_write, credentials=credentials)
    try:
        yield _current
    finally:
        _current = None


class StageIO:
    def __init__(
        self, spark: SparkSession, spec: StageSpec, *, in_process: InProcessStage | None = None
    ) -> None:
        self.spark = spark
        self.spec = spec
        self._in_process = in_process
        self._written: set[str] = set()
        self._streamed: str | None = None
        self._feeder: Feeder | None = None
        self._executors: ExecutorIO | None = None

    def _executor_io(self) -> ExecutorIO:
        """The executors' own data path (``executor_io.py``), made on first use; imported only then, so
        a staged stage does not import pyarrow's S3 client."""
        from .executor_io import ExecutorIO, credentials_from_env

        if self._executors is None:
            assert self.spec.store is not None
            given = self._in_process.credentials if self._in_process is not None else credentials_from_env()
            self._executors = ExecutorIO(self.spark, self.spec.store, given, self.spec.try_number)
        return self._executors

    @property
    def map_index(self) -> int | None:
        return self.spec.map_index

    def _input(self, name: str) -> InputSpec:
        if name not in self.spec.inputs:
            raise StageIOError(
                f"stage {self.spec.stage!r} reads input {name!r}, which it did not declare; declared inputs: "
                f"{sorted(self.spec.inputs) or 'none'} (add it to the operator's inputs=)"
            )
        return self.spec.inputs[name]

    def input_paths(self, name: str) -> list[str]:
        """The data files of every partition of a declared input, exactly as their manifests list them."""
        return [path for partition in self._input(name).partitions for path in partition.paths]

    def read(self, name: str) -> DataFrame:
        partitions = self._input(name).partitions
        views = [p.view for p in partitions if p.view]
        if views:  # pipelined partitions held by the Spark Connect server
            frames = [self.spark.table(f"global_temp.{view}") for view in views]
            result = frames[0]
            for frame in frames[1:]:
                result = result.unionByName(frame)
            return result
        if self.spec.store is not None and any(p.objects for p in partitions):
            return self._executor_io().read(partitions)
        paths = self.input_paths(name)
        if not paths:
            raise StageIOError(f"input {name!r} of stage {self.spec.stage!r} has no data files")
        return self.spark.read.parquet(*paths)

    # -- checkpointed stages (airflow_ft_provider/checkpoints) ---------------------------------------
    def read_stream(self, name: str) -> DataFrame:
        """A declared input as a streaming DataFrame over its committed partitions' files, read in
        micro-batches of at most ``execution.checkpointing.interval-volume`` (checkpointed stages).
        One input per stage: join the others as static DataFrames (``read``)."""
        checkpoint = self._checkpoint("read_stream")
        if self._streamed:
            raise StageIOError(
                f"stage {self.spec.stage!r} streams {self._streamed!r} already and now {name!r}: a "
                "checkpointed stage reads one input incrementally (a stream-stream join needs watermarks "
                f"that bounded inputs do not have); read {name!r} with io.read() and join it as a static "
                "DataFrame"
            )
        self._streamed = name
        partitions = self._input(name).partitions
        if not any(p.paths for p in partitions) or any(p.view for p in partitions):
            raise StageIOError(
                f"input {name!r} of stage {self.spec.stage!r} has no data files to stream (a pipelined input "
                "kept by the Spark Connect server cannot be read incrementally: use read())"
            )
        if checkpoint.stream is not None:  # the executors' data path (object_stream.py)
            return self._executor_io().read_stream(partitions, checkpoint.max_bytes_per_trigger)
        try:
            self._feeder = staged_feeder(
                name,
                [uri for partition in partitions for uri in partition.paths],
                checkpoint.location.removeprefix("file://"),
                volume=checkpoint.max_bytes_per_trigger,
                target=checkpoint.interval_seconds,
            )
        except ValueError as err:
            raise StageIOError(f"input {name!r}: {err}") from None
        self._feeder.resume()
        feed_root = self._feeder.feed_root
        schema = self.spark.read.parquet(*partitions[0].paths).schema
        os.makedirs(feed_root, exist_ok=True)
        return (
            self.spark.readStream.schema(schema)
            .option("recursiveFileLookup", "true")
            .option("maxBytesPerTrigger", checkpoint.max_bytes_per_trigger)
            .parquet(Path(feed_root).as_uri())
        )

    def write_stream(self, name: str, df: DataFrame, *, output_mode: str = "append") -> None:
        """Write a streaming DataFrame to a declared output, micro-batch by micro-batch, until the input
        available now is processed. Spark's checkpoint records each completed micro-batch; a retry
        resumes after the last one.

        ``output_mode``: ``"append"`` (default) for row-wise operations and ``dropDuplicates``, whose
        micro-batches' rows together are the result: Spark's file sink writes them, its log committing
        each batch's files (exactly once, and no Python worker in the server); ``"complete"`` for an
        aggregation, whose last micro-batch is the whole result: ``foreachBatch`` writes each into a
        directory of its own and removes the older ones. State lives in Spark's RocksDB state store
        (with changelog checkpointing when ``execution.checkpointing.incremental``)."""
        if output_mode not in OUTPUT_MODES:
            raise StageIOError(
                f"write_stream({name!r}, output_mode={output_mode!r}): use 'append' (row-wise operations, "
                "dropDuplicates) or 'complete' (aggregations); 'update' writes only the rows each "
                "micro-batch changed, whose union is not the result"
            )
        checkpoint = self._checkpoint("write_stream")
        output = self._claim(name)
        location = output.location.rstrip("/")
        codec = output.parquet_codec
        fail_in = checkpoint.fail_in_batch
        injected = injected_in_batch(fail_in)  # the closure below takes the text, not this module
        complete = output_mode == "complete"

        self.spark.conf.set(STATE_STORE_CONF, ROCKSDB_PROVIDER)
        self.spark.conf.set(CHANGELOG_CONF, "true" if checkpoint.changelog else "false")
        if checkpoint.stream is not None:
            rows, ran = self._executor_io().write_stream(
                df, self.spec.stage, (name, output), checkpoint, mode=output_mode
            )
            return self._streamed_output(name, output, rows, {"batches": ran})
        feeder = self._feeder
        assert feeder is not None
        if complete:
            writer = df.writeStream.foreachBatch(latest_batch_writer(location, codec, fail_in, injected))
        else:
            writer = df.writeStream.format("parquet").option("path", location).option("compression", codec)
            feeder.fail_in = fail_in  # a file that is not Parquet fails the batch's Spark job
        writer = (
            writer.outputMode(output_mode)
            .option("checkpointLocation", checkpoint.location)
            .trigger(processingTime="0 seconds")  # fed chunk by chunk until the feeder is done
        )
        query = start_stream(writer.start, stage=self.spec.stage, output=name, mode=output_mode)
        try:
            durations = feed_until_done(query, feeder, checkpoint.location.removeprefix("file://"))
        except Exception as err:
            failure = feeder.injected(err, fail_in)
            if failure is None:
                raise
            raise failure from None
        if not complete:  # files of a failed task attempt or batch are not output: its log says which are
            remove_uncommitted(Path(location.removeprefix("file://")))
        progress = [p for p in query.recentProgress if p is not None]
        read_rows = sum(int(getattr(p, "numInputRows", 0) or 0) for p in progress)
        batches = [int(p.batchId) for p in progress]
        rows = self._rows_written(location) + carried_rows(location)  # + what a restored checkpoint left
        self._streamed_output(
            name, output, rows, {"batches": batches, "input_rows": read_rows, "batch_seconds": durations}
        )

    def _streamed_output(self, name: str, output: OutputSpec, rows: int, stream: dict[str, object]) -> None:
        if self._in_process is not None:
            self._in_process.rows[name] = rows
            self._in_process.streams[name] = stream
        else:
            marker = {"result": name, "rows": rows, "format": output.format, **stream}
            self._write_marker(output.location.rstrip("/"), marker)

    def _checkpoint(self, what: str) -> CheckpointSpec:
        if self.spec.checkpoint is None:
            raise StageIOError(
                f"stage {self.spec.stage!r} calls {what}(), which needs a checkpointed stage: pass "
                "checkpointing=True (or a dict of execution.checkpointing.* keys) to its operator"
            )
        return self.spec.checkpoint

    def _claim(self, name: str) -> OutputSpec:
        if name not in self.spec.outputs:
            raise StageIOError(
                f"stage {self.spec.stage!r} writes output {name!r}, which it did not declare; "
                "declared outputs: "
                f"{sorted(self.spec.outputs) or 'none'} (add it to the operator's outputs=)"
            )
        if name in self._written:
            raise StageIOError(
                f"stage {self.spec.stage!r} writes output {name!r} twice; write each output once"
            )
        self._written.add(name)
        return self.spec.outputs[name]

    def write(self, name: str, df: DataFrame) -> None:
        output = self._claim(name)
        if self._fail_before_write():
            raise InjectedFailure(
                f"injected failure in the Spark application of {self.spec.stage!r} (ft_faults)"
            )
        content = None
        if output.location.startswith(VIEW_PREFIX):
            rows = self._publish_view(df, output.location[len(VIEW_PREFIX) :])
        elif self.spec.store is not None and output.location.startswith("s3://"):
            written = self._executor_io().write(df, output.location, output.parquet_codec)
            rows, content = written.rows, written.content
        else:
            observer = ContentObserver(df)
            observer.observed.write.mode("error").option("compression", output.parquet_codec).parquet(
                output.location
            )
            rows = self._rows_written(output.location)
            content = observer.checksum(rows)
        if self._in_process is not None:
            self._in_process.rows[name] = rows
            self._in_process.contents[name] = content
        else:
            self._write_marker(
                output.location, {"result": name, "rows": rows, "format": output.format, "content": content}
            )

    def _rows_written(self, location: str) -> int:
        """The rows of a local output: from the Parquet footers on this disk (staged: it is Spark's), no
        Spark job; where they cannot be read here, Spark counts them (from the same footers, as a job)."""
        rows = rows_in_footers(location)
        if rows is None:
            rows = self.spark.read.option("recursiveFileLookup", "true").parquet(location).count()
        return rows

    def _fail_before_write(self) -> bool:
        if self._in_process is not None:
            return self._in_process.fail_before_write
        return self.spark.conf.get(INJECT_FAILURE_CONF, "false") == "true"

    def _publish_view(self, df: DataFrame, view: str) -> int:
        """Keep the data in the server (memory, spilling to disk) and name it for the region's consumers."""
        from pyspark import StorageLevel

        cached = df.persist(StorageLevel.MEMORY_AND_DISK)
        rows = cached.count()  # materializes the cache: consumers never recompute from our inputs
        cached.createOrReplaceGlobalTempView(view)
        return rows

    def _write_marker(self, location: str, content: dict) -> None:
        """Through Hadoop's FileSystem, so one code path serves file:// staging and s3a:// alike."""
        if location.startswith("s3://"):
            self._executor_io().put_json(location, OUTPUT_MARKER, content)
            return
        write_local_marker(self.spark, location.rstrip("/") + "/" + OUTPUT_MARKER, content)


def load_spec(spark: SparkSession | None = None) -> StageSpec:
    encoded = None
    if spark is not None:
        encoded = spark.conf.get(SPARK_CONF_KEY, None)
    encoded = encoded or os.environ.get(ENV_VAR)
    if not encoded:
        raise StageIOError(
            f"no stage spec found (Spark conf {SPARK_CONF_KEY} or env {ENV_VAR}); run this application "
            "through SparkStageOperator, which passes its inputs and outputs"
        )
    return StageSpec.decode(encoded)


def for_session(spark: SparkSession) -> StageIO:
    if _current is not None:
        return StageIO(spark, _current.spec, in_process=_current)
    report = spark.conf.get(FAILURE_REPORT_CONF, None)
    if report:  # a spark-submit driver: its uncaught exception is told to the operator
        report_uncaught(report)
    return StageIO(spark, load_spec(spark))
