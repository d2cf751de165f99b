"""Partition data that Spark's executors read and write themselves (``partition_objects.py``), for
``stage_io`` when the operator chose that data path (``StageSpec.store`` is set).

The application's driver only plans: it hands Spark the objects to read or the attempt prefix to
write, and gets back the count of rows the executors recorded (``_ft_written.json``). Nothing here
touches a row.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from .failure_report import InjectedFailure, injected_in_batch
from .object_files import s3_filesystem
from .object_stream import (
    StreamObjects,
    assemble,
    batches_needed,
    per_batch,
    run_to_end,
    start_writing,
    stream_objects,
)
from .partition_objects import WriteResult, access_options, read_objects, write_objects
from .spec import (
    CREDENTIAL_ENV_VARS,
    CheckpointSpec,
    InputPartition,
    OutputSpec,
    StoreAccess,
    StoreCredentials,
)
from .stream_start import start_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def credentials_from_env() -> StoreCredentials | None:
    """The key pair a spark-submit driver was given in its environment (``CREDENTIAL_ENV_VARS``);
    None: the executors use their own (an instance role, their ``AWS_*`` variables)."""
    access_key, secret_key, token = (os.environ.get(name) for name in CREDENTIAL_ENV_VARS)
    if not access_key or not secret_key:
        return None
    return StoreCredentials(access_key, secret_key, token or None)


def ship_by_value() -> None:
    """Pickle this package's Spark-side modules by value from now on, for a streaming query's steps:
    they then do not depend on the session's artifacts reaching the query's tasks (a query outlives
    the call that started it)."""
    from pyspark import cloudpickle

    from . import checksums, content, object_files, object_stream, partition_objects, spec, written

    for module in (checksums, content, object_files, object_stream, partition_objects, spec, written):
        cloudpickle.register_pickle_by_value(module)


class ExecutorIO:
    """The executors' reads (``read_objects``) and writes (``write_objects``) of one try, with its
    credentials; ``try_number`` names a checkpointed stage's micro-batch outputs of this try."""

    def __init__(
        self,
        spark: SparkSession,
        access: StoreAccess,
        credentials: StoreCredentials | None,
        try_number: int,
    ) -> None:
        self.spark = spark
        self.try_number = try_number
        self.credentials = credentials
        self.options = access_options(access)
        self.batches = 0  # the micro-batches of the streamed input (read_stream)

    def read(self, partitions: list[InputPartition]) -> DataFrame:
        """The partitions' objects, one Spark partition each, verified by the executor that reads it."""
        objects = [stored for partition in partitions for stored in partition.objects]
        return read_objects(self.spark, objects, self.options, self.credentials)

    def write(self, df: DataFrame, location: str, codec: str) -> WriteResult:
        """Write ``df`` under the attempt prefix ``location`` (``s3://``); the rows the executors wrote,
        with their checksum."""
        target = location.rstrip("/") + "/"
        return write_objects(df, target, self.options, self.credentials, compression=codec)

    def put_json(self, location: str, name: str, content: dict[str, object]) -> None:
        """A small JSON object beside an output (the marker a spark-submit driver leaves the operator)."""
        key = location.removeprefix("s3://").rstrip("/") + "/" + name
        with s3_filesystem(self.options, self.credentials).open_output_stream(key) as out:
            out.write(json.dumps(content).encode())

    # -- checkpointed stages (object_stream.py) ------------------------------------------------------
    def read_stream(self, partitions: list[InputPartition], volume: int) -> DataFrame:
        """The partitions' objects as a stream of micro-batches of about ``volume`` bytes each."""
        objects = [stored for partition in partitions for stored in partition.objects]
        count = per_batch([o.size for o in objects], volume)
        self.batches = batches_needed(len(objects), count)
        return stream_objects(self.spark, objects, self.options, self.credentials, per_batch=count)

    def write_stream(
        self,
        df: DataFrame,
        stage: str,
        output: tuple[str, OutputSpec],
        checkpoint: CheckpointSpec,
        *,
        mode: str,
    ) -> tuple[int, list[int]]:
        """Run the query to its last micro-batch, each written under the checkpoint's stream prefix,
        then assemble the output under ``output``'s attempt prefix: its rows, and the micro-batches
        this try ran (the others a restored checkpoint had done)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        name, spec = output
        assert checkpoint.stream is not None and self.batches
        ship_by_value()
        injected = injected_in_batch(checkpoint.fail_in_batch)
        write = StreamObjects(
            checkpoint.stream,
            self.batches,
            self.try_number,
            self.options,
            self.credentials,
            compression=spec.parquet_codec,
            fail_in=checkpoint.fail_in_batch,
            injected=injected,
        )
        schema = to_arrow_schema(df.schema)
        writer = start_writing(df, write, mode=mode, checkpoint=checkpoint.location)
        query = start_stream(writer.start, stage=stage, output=name, mode=mode)
        try:
            ran = run_to_end(query, self.batches)
        except Exception as err:
            if checkpoint.fail_in_batch is not None and injected in str(err):
                raise InjectedFailure(injected) from None
            raise
        rows = assemble(
            checkpoint.stream,
            spec.location,
            self.batches,
            complete=mode == "complete",
            schema=schema,
            compression=spec.parquet_codec,
            options=self.options,
            credentials=self.credentials,
        )
        return rows, ran
