"""The stage spec: what the operator tells a Spark application about its inputs and outputs.

It travels as base64 JSON in the Spark conf ``spark.airflow_ft.stage_spec``: on ``spark-submit``'s
command line (reaches the driver in client and cluster deploy modes alike), or set on the session of a
Spark Connect stage; for tests and local runs also the ``FT_STAGE_SPEC`` environment variable.
Stdlib only: this module is shipped to the Spark driver, which may have neither Airflow nor boto3.

A partition's data is either files (``paths``: ``file://`` staging or ``s3a://``), objects the executors
read themselves and verify (``objects``, with ``StageSpec.store``: ``partition_objects.py``) or, for a
pipelined partition kept by a Spark Connect server, a global temporary view (``view``). The spec holds no
secret: it is in the Spark conf, which Spark's UI shows.
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
# A spark-submit driver's store credentials, when the executors do not have their own (never in the conf)
CREDENTIAL_ENV_VARS = ("FT_STORE_ACCESS_KEY_ID", "FT_STORE_SECRET_ACCESS_KEY", "FT_STORE_SESSION_TOKEN")


@dataclass(frozen=True)
class StoredObject:
    """One object a read must return exactly: ``bucket/key``, its size and checksum (from the manifest)."""

    key: str
    size: int
    checksum: str


@dataclass(frozen=True)
class StoreAccess:
    """How Spark's executors reach the partition store (credentials travel apart: ``StoreCredentials``)."""

    endpoint: str | None = None  # an S3-compatible endpoint URL; None: AWS
    region: str | None = None


@dataclass(frozen=True)
class StoreCredentials:
    """A key pair for executors that have no credentials of their own; kept out of every conf and log."""

    access_key: str
    secret_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class InputPartition:
    partition_id: str  # "result" or "result[i]", as in the failover core
    paths: list[str]  # data files listed by the partition's manifest (file://, s3a:// or s3://)
    format: str = "parquet"
    view: str | None = None  # a pipelined partition held by the Spark Connect server (global_temp.<view>)
    objects: list[StoredObject] = field(default_factory=list)  # read by the executors (StageSpec.store)


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

    @property
    def parquet_codec(self) -> str:
        """The Parquet codec Spark calls what the output declares (``none`` for no compression)."""
        return "none" if self.compression in ("none", "uncompressed") else self.compression


@dataclass(frozen=True)
class CheckpointSpec:
    """A checkpointed stage: where Spark keeps its checkpoint (the worker's disk, kept across the
    stage's tries), how much input one micro-batch reads, and, for fault injection, the micro-batch
    inside which the application fails (its checkpoint is then not completed)."""

    location: str  # URI of Spark's checkpointLocation (staged: file:// on the worker's disk)
    max_bytes_per_trigger: int
    fail_in_batch: int | None = None
    changelog: bool = False  # RocksDB changelog checkpointing (execution.checkpointing.incremental)
    interval_seconds: float = 60.0  # the time a micro-batch aims at (execution.checkpointing.interval)
    stream: str | None = None  # executors' data path: s3:// prefix of the micro-batches' outputs


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
    store: StoreAccess | None = None  # set when the executors read and write the store themselves

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
                partitions=[_input_partition(p) for p in spec["partitions"]],
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
            store=StoreAccess(**data["store"]) if data.get("store") else None,
        )


def _input_partition(data: dict) -> InputPartition:
    objects = [StoredObject(**o) for o in data.pop("objects", None) or ()]
    return InputPartition(**data, objects=objects)
