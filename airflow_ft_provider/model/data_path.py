"""Where a stage's partition data flows (``data_path=``): between Spark's executors and S3, or through
the Airflow worker's disk, or through Spark's s3a connector.

* ``"executors"``: each executor reads the objects the manifest lists, verifying them, and writes its
  own objects under the try's attempt prefix, recording their checksums; the worker only commits the
  manifest. Works wherever the executors run (``execution/placement.ExecutorS3``), so it is the
  default. A checkpointed stage's micro-batches too (``spark/object_stream.py``).
* ``"staged"``: the worker fetches inputs to its disk and uploads outputs from there; the Spark driver
  and executors must see the worker's disk (local Spark, a Connect server on the worker's machine).
  Faster there for data-heavy stages, whose bytes otherwise cross the JVM-Python boundary in the
  executors (bench/bench_data_path.py).
* ``"s3a"``: Spark reads and writes ``s3a://`` itself; the cluster needs the hadoop-aws connector.
"""

from __future__ import annotations

import enum

from airflow_ft_provider.model.choice import parse_choice


class SparkElsewhere(RuntimeError):
    """Spark wrote a staged output where this worker cannot see it: the staged path needs a Spark that
    shares the worker's disk. Every try would fail the same way, so it is not restarted."""


class DataPath(enum.Enum):
    EXECUTORS = "executors"
    STAGED = "staged"
    S3A = "s3a"

    @classmethod
    def parse(cls, value: object, *, where: str) -> DataPath:
        """``value`` as declared (a DataPath or its name); ValueError naming ``where`` otherwise."""
        return parse_choice(cls, value, where=where, key="data_path", see="Running on a cluster")

    @staticmethod
    def of_stage(declared: DataPath | None, pipeline: DataPath) -> DataPath:
        """A stage's path: its own, else its pipeline's."""
        return pipeline if declared is None else declared
