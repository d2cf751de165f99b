"""Partition I/O inside a PySpark application started by ``SparkStageOperator``.

    from airflow_ft_provider.spark import stage_io

    io = stage_io.for_session(spark)
    orders = io.read("cleaned_orders")          # a declared input, as a DataFrame
    io.write("daily_revenue", revenue_df)       # a declared output, written once

The application only writes data files and a small marker; the operator commits the partition
through the store afterwards (one manifest PUT), so a crashed application never exposes output.
Reading an input that is not declared, or writing an output twice, is an error.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from .spec import ENV_VAR, INJECT_FAILURE_CONF, OUTPUT_MARKER, SPARK_CONF_KEY, StageSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class StageIOError(RuntimeError):
    """The application used its declared inputs or outputs wrongly."""


class StageIO:
    def __init__(self, spark: SparkSession, spec: StageSpec) -> None:
        self.spark = spark
        self.spec = spec
        self._written: set[str] = set()

    @property
    def map_index(self) -> int | None:
        return self.spec.map_index

    def input_paths(self, name: str) -> list[str]:
        """The data files of every partition of a declared input, exactly as their manifests list them."""
        if name not in self.spec.inputs:
            raise StageIOError(
                f"stage {self.spec.stage!r} reads input {name!r}, which it did not declare; declared inputs: "
                f"{sorted(self.spec.inputs) or 'none'} (add it to the operator's inputs=)"
            )
        return [path for partition in self.spec.inputs[name].partitions for path in partition.paths]

    def read(self, name: str) -> DataFrame:
        paths = self.input_paths(name)
        if not paths:
            raise StageIOError(f"input {name!r} of stage {self.spec.stage!r} has no data files")
        return self.spark.read.parquet(*paths)

    def write(self, name: str, df: DataFrame) -> None:
        if name not in self.spec.outputs:
            raise StageIOError(
                f"stage {self.spec.stage!r} writes output {name!r}, which it did not declare; declared outputs: "
                f"{sorted(self.spec.outputs) or 'none'} (add it to the operator's outputs=)"
            )
        if name in self._written:
            raise StageIOError(f"stage {self.spec.stage!r} writes output {name!r} twice; write each output once")
        if self.spark.sparkContext.getConf().get(INJECT_FAILURE_CONF, "false") == "true":
            raise RuntimeError(f"injected failure in the Spark application of {self.spec.stage!r} (ft_faults)")
        output = self.spec.outputs[name]
        self._written.add(name)
        codec = "none" if output.compression in ("none", "uncompressed") else output.compression
        df.write.mode("errorifexists").option("compression", codec).parquet(output.location)
        rows = self.spark.read.parquet(output.location).count()  # answered from Parquet footers
        self._write_marker(output.location, {"result": name, "rows": rows, "format": output.format})

    def _write_marker(self, location: str, content: dict) -> None:
        """Through Hadoop's FileSystem, so one code path serves file:// staging and s3a:// alike."""
        jvm = self.spark.sparkContext._jvm
        path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/" + OUTPUT_MARKER)
        fs = path.getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration())
        stream = fs.create(path, False)
        try:
            stream.write(bytearray(json.dumps(content).encode()))
        finally:
            stream.close()


def load_spec(spark: SparkSession | None = None) -> StageSpec:
    encoded = None
    if spark is not None:
        encoded = spark.sparkContext.getConf().get(SPARK_CONF_KEY, None)
    encoded = encoded or os.environ.get(ENV_VAR)
    if not encoded:
        raise StageIOError(
            f"no stage spec found (Spark conf {SPARK_CONF_KEY} or env {ENV_VAR}); run this application "
            "through SparkStageOperator, which passes its inputs and outputs"
        )
    return StageSpec.decode(encoded)


def for_session(spark: SparkSession) -> StageIO:
    return StageIO(spark, load_spec(spark))
