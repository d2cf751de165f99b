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

from .partition_objects import access_options, read_objects, s3_filesystem, write_objects
from .spec import CREDENTIAL_ENV_VARS, InputPartition, StoreAccess, StoreCredentials

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
    """The executors' reads (``read_objects``) and writes (``write_objects``) of one try, with its
    credentials."""

    def __init__(
        self, spark: SparkSession, access: StoreAccess, credentials: StoreCredentials | None
    ) -> None:
        self.spark = spark
        self.credentials = credentials
        self.options = access_options(access)

    def read(self, partitions: list[InputPartition]) -> DataFrame:
        """The partitions' objects, one Spark partition each, verified by the executor that reads it."""
        objects = [stored for partition in partitions for stored in partition.objects]
        return read_objects(self.spark, objects, self.options, self.credentials)

    def write(self, df: DataFrame, location: str, codec: str) -> int:
        """Write ``df`` under the attempt prefix ``location`` (``s3://``); the rows the executors wrote."""
        target = location.rstrip("/") + "/"
        return write_objects(df, target, self.options, self.credentials, compression=codec)

    def put_json(self, location: str, name: str, content: dict[str, object]) -> None:
        """A small JSON object beside an output (the marker a spark-submit driver leaves the operator)."""
        key = location.removeprefix("s3://").rstrip("/") + "/" + name
        with s3_filesystem(self.options, self.credentials).open_output_stream(key) as out:
            out.write(json.dumps(content).encode())
