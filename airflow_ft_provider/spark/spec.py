"""The stage spec: what the operator tells a Spark application about its inputs and outputs.

It travels as base64 JSON in the Spark conf ``spark.airflow_ft.stage_spec``: on ``spark-submit``'s
command line (reaches the driver in client and cluster deploy modes alike), or set on the session of a
Spark Connect stage; for tests and local runs also the ``FT_STAGE_SPEC`` environment variable.
Stdlib only: this module is shipped to the Spark driver, which may have neither Airflow nor boto3.

A partition's data is either files (``paths``: ``file://`` staging or ``s3a://``) or, for a pipelined
partition kept by a Spark Connect server, a global temporary view (``view``).
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field

SPEC_VERSION = 1
SPARK_CONF_KEY = "spark.airflow_ft.stage_spec"
ENV_VAR = "FT_STAGE_SPEC"
OUTPUT_MARKER = "_FT_OUTPUT.json"  # written by stage_io beside an output's data files
INJECT_FAILURE_CONF = "spark.airflow_ft.inject_failure"  # fault injection: fail before the first write


VIEW_PREFIX = "view:"  # an output location naming the global temporary view to publish


@dataclass(frozen=True)
class InputPartition:
    partition_id: str  # "result" or "result[i]", as in the failover core
    paths: list[str]  # data files listed by the partition's manifest (file:// or s3a://)
    format: str = "parquet"
    view: str | None = None  # a pipelined partition held by the Spark Connect server (global_temp.<view>)


@dataclass(frozen=True)
class InputSpec:
    result: str
    result_type: str  # "blocking" or "pipelined"
    partitions: list[InputPartition]


@dataclass(frozen=True)
class OutputSpec:
    result: str
    result_type: str
    location: str  # file:// staging or s3a:// attempt prefix to write to, or "view:<name>" to publish
    format: str = "parquet"
    compression: str = "snappy"


@dataclass(frozen=True)
class CheckpointSpec:
    """A checkpointed stage: where Spark keeps its checkpoint (the worker's disk, kept across the
    stage's tries), how much input one micro-batch reads, and, for fault injection, the micro-batch
    inside which the application fails (its checkpoint is then not completed)."""

    location: str  # file:// URI of Spark's checkpointLocation
    max_bytes_per_trigger: int
    fail_in_batch: int | None = None
    changelog: bool = False  # RocksDB changelog checkpointing (execution.checkpointing.incremental)
    interval_seconds: float = 60.0  # the time a micro-batch aims at (execution.checkpointing.interval)


@dataclass(frozen=True)
class StageSpec:
    pipeline: str
    run_id: str
    stage: str
    map_index: int | None
    try_number: int
    inputs: dict[str, InputSpec] = field(default_factory=dict)
    outputs: dict[str, OutputSpec] = field(default_factory=dict)
    version: int = SPEC_VERSION
    checkpoint: CheckpointSpec | None = None  # set for a checkpointed stage

    def encode(self) -> str:
        return base64.b64encode(json.dumps(asdict(self), sort_keys=True).encode()).decode()

    @classmethod
    def decode(cls, text: str) -> StageSpec:
        try:
            data = json.loads(base64.b64decode(text.encode(), validate=True))
        except (ValueError, TypeError) as err:
            raise ValueError(
                f"the stage spec is not base64 JSON ({err}); was the app started by SparkStageOperator?"
            ) from None
        if not isinstance(data, dict) or data.get("version") != SPEC_VERSION:
            raise ValueError(
                "unsupported stage spec version "
                f"{data.get('version') if isinstance(data, dict) else data!r}; "
                f"expected {SPEC_VERSION}: the Spark application and the operator come from different "
                "releases"
            )
        inputs = {
            name: InputSpec(
                result=spec["result"],
                result_type=spec["result_type"],
                partitions=[InputPartition(**p) for p in spec["partitions"]],
            )
            for name, spec in data["inputs"].items()
        }
        outputs = {name: OutputSpec(**spec) for name, spec in data["outputs"].items()}
        return cls(
            pipeline=data["pipeline"],
            run_id=data["run_id"],
            stage=data["stage"],
            map_index=data["map_index"],
            try_number=data["try_number"],
            inputs=inputs,
            outputs=outputs,
            checkpoint=CheckpointSpec(**data["checkpoint"]) if data.get("checkpoint") else None,
        )
