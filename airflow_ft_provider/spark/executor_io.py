"""Partition data that Spark's executors read and write themselves (the ``ft_partition`` source), for
``stage_io`` when the operator chose that data path (``StageSpec.store`` is set).

The application's driver only plans: it registers the source, hands Spark the objects to read or the
attempt prefix to write, and afterwards reads back the few kilobytes the executors recorded
(``_ft_written.json``) to count the rows. Nothing here touches a row.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from .partition_source import SOURCE_NAME, access_options, read_objects, s3_filesystem, source_with
from .spec import CREDENTIAL_ENV_VARS, InputPartition, StoreAccess, StoreCredentials
from .written import WRITTEN_RECORD, parse_written

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def credentials_from_env() -> StoreCredentials | None:
    """The key pair a spark-submit driver was given in its environment (``CREDENTIAL_ENV_VARS``);
    None: the executors use their own (an instance role, their ``AWS_*`` variables)."""
    access_key, secret_key, token = (os.environ.get(name) for name in CREDENTIAL_ENV_VARS)
    if not access_key or not secret_key:
        return None
    return StoreCredentials(access_key, secret_key, token or None)


class ExecutorIO:
    """The executors' reads (``read_objects``) and writes (the ``ft_partition`` source, registered on
    the session) of one try, with its credentials."""

    def __init__(
        self, spark: SparkSession, access: StoreAccess, credentials: StoreCredentials | None
    ) -> None:
        self.spark = spark
        self.credentials = credentials
        self.options = access_options(access)
        spark.dataSource.register(source_with(credentials))

    def read(self, partitions: list[InputPartition]) -> DataFrame:
        """The partitions' objects, one Spark partition each, verified by the executor that reads it."""
        objects = [stored for partition in partitions for stored in partition.objects]
        return read_objects(self.spark, objects, self.options, self.credentials)

    def write(self, df: DataFrame, location: str, codec: str) -> int:
        """Write ``df`` under the attempt prefix ``location`` (``s3://``); the rows the executors wrote."""
        target = location.rstrip("/") + "/"
        df.write.format(SOURCE_NAME).mode("append").options(
            **self.options, target=target, compression=codec
        ).save()
        bucket_key = target.removeprefix("s3://") + WRITTEN_RECORD
        with s3_filesystem(self.options, self.credentials).open_input_stream(bucket_key) as stream:
            return sum(f.rows for f in parse_written(stream.read()))

    def put_json(self, location: str, name: str, content: dict[str, object]) -> None:
        """A small JSON object beside an output (the marker a spark-submit driver leaves the operator)."""
        key = location.removeprefix("s3://").rstrip("/") + "/" + name
        with s3_filesystem(self.options, self.credentials).open_output_stream(key) as out:
            out.write(json.dumps(content).encode())
