"""Provider metadata read by Airflow's providers manager (entry point ``apache_airflow_provider``).

The ``[ft_provider]`` config section is the cluster-wide default (Flink's configuration file); a
pipeline's own settings override it. Option defaults come from the core's option table and the
partition store's constants, so that the metadata and the code cannot drift apart.

No ``connection-types``: the partition store uses the ``aws`` connection type, which belongs to the
Amazon provider (its UI form and fields). Registering it here as well would make the providers
manager warn on every start and, as providers are read in package-name order, let this package's
hook take over the ``aws`` type from the Amazon provider when both are installed.

``get_provider_info`` is also the one place a provider's code runs, with Airflow's defaults, in the
scheduler and in a Celery worker before they fork task processes (every Airflow command loads the
providers' configuration first): it preloads the stage clients there (``execution/preload.py``).
"""

from __future__ import annotations

from typing import TypeAlias

from airflow_ft_provider import __version__
from airflow_ft_provider.failover.durations import format_duration
from airflow_ft_provider.failover.failover_strategies import FAILOVER_STRATEGY_KEY
from airflow_ft_provider.failover.restart_options import BATCH_PIPELINE_DEFAULTS, OPTIONS, TYPE_KEY
from airflow_ft_provider.partitions.conditional import ALLOW_UNCONDITIONAL_KEY
from airflow_ft_provider.partitions.manifest import CHECKSUM_ALGORITHMS, DEFAULT_CHECKSUM
from airflow_ft_provider.partitions.store import DEFAULT_ORPHAN_GRACE, DEFAULT_RETENTION
from airflow_ft_provider.partitions.sweep import DEFAULT_SWEEP_EVERY, DEFAULT_SWEEP_MAX_RELEASES

CONFIG_SECTION = "ft_provider"
PIPELINES = "Fault-tolerant Spark pipelines"
PARTITIONS = "Result partition store"
# One option of a config section, in the providers manager's form: description, version_added, type,
# example and default, each a string or null.
ConfigOption: TypeAlias = dict[str, str | None]


def _partition_store_options() -> dict[str, ConfigOption]:
    """The keys ``PartitionStoreHook`` reads (airflow_ft_provider/hooks/partition_store.py)."""
    return {
        "partition_store_url": {
            "description": "Default result-partition store, s3://bucket/prefix/, used by pipelines, "
            "sensors and triggers that name none. Its credentials come from the pipeline's aws connection. "
            "When set, the default restart strategy is exponential-delay.",
            "version_added": "0.1.0",
            "type": "string",
            "example": "s3://data-lake/ft-partitions/",
            "default": None,
        },
        "partition_store_conn_id": {
            "description": "The aws connection of partition_store_url: used by pipelines that name no "
            "aws_conn_id, and by the API server's failover page for pipelines whose DAG declares no "
            "blocking output (the partition Assets of the others name their connection).",
            "version_added": "0.1.0",
            "type": "string",
            "example": "data_lake_s3",
            "default": "aws_default",
        },
        "partition_store_cache_dir": {
            "description": "Local directory for task-local recovery on the staged data path: partitions "
            "read or written by a worker are kept here and reused after verification against the S3 "
            "manifest, within partition_store_cache_max_size and partition_store_cache_max_age (least "
            "recently used files go first). Unset: no cache.",
            "version_added": "0.1.0",
            "type": "string",
            "example": "/var/cache/airflow-ft-partitions",
            "default": None,
        },
        "partition_store_cache_max_size": {
            "description": "The most the task-local cache keeps (Flink's memory size notation, e.g. "
            "'10 gb', '500 mb'; 'none' for no bound). After every fetch and commit that adds files, the "
            "least recently used files are removed until the cache fits (files used in the last 5 "
            "minutes stay).",
            "version_added": "0.2.0",
            "type": "string",
            "example": "500 mb",
            "default": "10 gb",
        },
        "partition_store_cache_max_age": {
            "description": "Cached files unused for longer than this are removed ('none': no age bound).",
            "version_added": "0.2.0",
            "type": "string",
            "example": "1 d",
            "default": "7 d",
        },
        "partition_store_checksum": {
            "description": "Checksum recorded in manifests for every partition object: "
            + ", ".join(sorted(CHECKSUM_ALGORITHMS))
            + ".",
            "version_added": "0.1.0",
            "type": "string",
            "example": "sha256",
            "default": DEFAULT_CHECKSUM,
        },
        "partition_store_retention": {
            "description": "How long the partitions of an ended run (succeeded, failed, or marked by "
            "hand) are kept before the life-cycle sweep releases them, unless a registered consumer "
            "still needs them; a released run's marker is removed one retention later (a duration: "
            '"7 d", "12 h"). A pipeline may set its own (FailoverPipeline(retention=...)).',
            "version_added": "0.1.0",
            "type": "string",
            "example": "3 d",
            "default": format_duration(DEFAULT_RETENTION),
        },
        "partition_store_sweep_interval": {
            "description": "How often, at most, a run's end sweeps its pipeline's expired runs from the "
            "store (a duration; 0 s: at every run end).",
            "version_added": "0.1.0",
            "type": "string",
            "example": "15 min",
            "default": format_duration(DEFAULT_SWEEP_EVERY),
        },
        "partition_store_sweep_max_runs": {
            "description": "How many expired runs one sweep releases at most (the rest wait for the next "
            "sweep), so that a run's end never spends long deleting.",
            "version_added": "0.1.0",
            "type": "integer",
            "example": "50",
            "default": str(DEFAULT_SWEEP_MAX_RELEASES),
        },
        "partition_store_orphan_grace": {
            "description": "Age after which attempt objects no manifest references (crashed, fenced or "
            "superseded commits) are deleted by the orphan clean-up (a duration).",
            "version_added": "0.1.0",
            "type": "string",
            "example": "30 min",
            "default": format_duration(DEFAULT_ORPHAN_GRACE),
        },
        ALLOW_UNCONDITIONAL_KEY: {
            "description": "UNSAFE. Write to a partition store whose S3 endpoint ignores conditional writes "
            "(If-None-Match / If-Match), which each process probes before its first write. Off, such a "
            "store is refused with an error; on, a warning is logged and a zombie try can replace a newer "
            "partition's manifest and concurrent recovery-journal updates can be lost.",
            "version_added": "0.1.0",
            "type": "boolean",
            "example": "True",
            "default": "False",
        },
    }


def _checkpoint_options() -> dict[str, ConfigOption]:
    """Flink's checkpoint keys (airflow_ft_provider/checkpoints/config.py): cluster defaults of
    checkpointed stages, overridden by a pipeline's and a stage's ``checkpointing=``."""
    from airflow_ft_provider.checkpoints.config import (
        DESCRIPTIONS,
        INTERVAL,
        INTERVAL_VOLUME,
        MIN_PAUSE,
        TIMEOUT,
        CheckpointConfig,
    )

    defaults: dict[str, object] = {
        **CheckpointConfig().as_keys(),
        "execution.checkpointing.mode": "EXACTLY_ONCE",
    }
    for key in (INTERVAL, MIN_PAUSE, TIMEOUT):  # seconds, in Flink's spelling as a user writes them
        defaults[key] = format_duration(float(str(defaults[key])))
    defaults[INTERVAL_VOLUME] = f"{int(str(defaults[INTERVAL_VOLUME])) >> 20} mb"
    return {
        key: {
            "description": f"Checkpointed stages: {text} Default: {defaults[key]}.",
            "version_added": "0.2.0",
            "type": "string",
            "example": None,
            "default": None,  # unset: the stage's own settings, else the built-in default below
        }
        for key, text in DESCRIPTIONS.items()
    } | {
        "checkpoint_local_dir": {
            "description": "Directory on each worker for the task-local copy of staged checkpointed "
            "stages (Spark's checkpoint, staged inputs, the output of completed micro-batches); kept "
            "across a stage's failed tries, released when its output is committed. Default: "
            "airflow-ft-checkpoints in the temp dir.",
            "version_added": "0.2.0",
            "type": "string",
            "example": "/var/lib/airflow/ft-checkpoints",
            "default": None,
        },
        "spark_checkpoint_dir": {  # stage_try/checkpointed_stream.py
            "description": "Where Spark keeps the checkpoints of checkpointed stages on the executors' "
            "data path: a path or URI as Spark's driver sees it. The default is on the driver's disk, which "
            "a retry finds when the driver is the same (a Spark Connect server, local Spark); give a path "
            "every Spark host sees (hdfs://, a shared mount, s3a://) for stateful stages whose executors "
            "run on several hosts, or to resume after the driver's host is lost.",
            "version_added": "0.1.0",
            "type": "string",
            "example": "hdfs:///airflow-ft/checkpoints",
            "default": "/tmp/airflow-ft-spark-checkpoints",
        },
    }


def _config_options() -> dict[str, ConfigOption]:
    options: dict[str, ConfigOption] = {
        TYPE_KEY: {
            "description": "Default restart strategy: none (off, disable), fixed-delay, failure-rate or "
            "exponential-delay. Unset: exponential-delay when a partition store is configured, else none. "
            "Flink's deprecated name of this key, restart-strategy, is still read (with a warning).",
            "version_added": "0.1.0",
            "type": "string",
            "example": "exponential-delay",
            "default": None,
        },
        FAILOVER_STRATEGY_KEY: {
            "description": "Which tasks restart after a failure: 'region' (the affected failover regions) "
            "or 'full' (the whole DAG run).",
            "version_added": "0.1.0",
            "type": "string",
            "example": "full",
            "default": "region",
        },
    }
    for option in OPTIONS.values():
        options[option.key] = {
            # The range the loader enforces, from the same table: "Must be > 1."
            "description": f"{option.description} Must be {option.requirement}.",
            "version_added": "0.1.0",
            "type": {"int": "integer", "float": "float"}.get(option.kind, "string"),
            "example": None,
            "default": str(BATCH_PIPELINE_DEFAULTS.get(option.key, option.default)),
        }
    options.update(_partition_store_options())
    options.update(_checkpoint_options())
    options["allow_fault_injection"] = {  # read by airflow_ft_provider.faults (not imported: parse cost)
        "description": "Let a DAG run's 'ft_faults' conf inject failures into pipeline stages (raise, fail "
        "the Spark application, SIGKILL the task process, delete or truncate partition objects). For test "
        "and demo deployments only: anyone allowed to trigger a run could otherwise kill tasks and damage "
        "data. Off: a run asking for faults gets a warning in the task log and runs without them.",
        "version_added": "0.1.0",
        "type": "boolean",
        "example": "True",
        "default": "False",
    }
    options["preload_stage_clients"] = {  # read by airflow_ft_provider.execution.preload
        "description": "Load the clients a stage try uses when the scheduler (LocalExecutor) or a Celery "
        "worker starts: the Spark Connect client (pyspark, pandas, pyarrow, grpc), boto3's S3 client "
        "code with botocore's parsed S3 data files, and the stage try's own modules. Task processes forked "
        "from its workers then skip loading them (2.5-3.5 CPU-s per Connect stage try, ~0.5 CPU-s per try "
        "for S3, ~0.1 CPU-s for the try's modules). Works with Airflow's defaults (the provider's "
        "metadata is read when these commands start); costs that process the loading once and ~150 MB of "
        "memory. No session, channel or connection is opened before the fork. "
        "On by default: a Connect stage try costs 0.67 s with it and 1.87 s without (bench/README.md).",
        "version_added": "0.1.0",
        "type": "boolean",
        "example": "False",
        "default": "True",
    }
    options["wait_for_running_work"] = {  # read by airflow_ft_provider.stage_try.adoption
        "description": "On Spark Connect, a try whose earlier try's worker died while the server was still "
        "writing its outputs waits for that write to end and commits it, instead of computing the same "
        "output a second time (the earlier try's staged output, on the same machine, with unchanged inputs "
        "and code). Off: the earlier try's operations are interrupted and the output computed again. The "
        "server removes an execution nobody reattached to after spark.connect.execute.manager."
        "detachedTimeout (5 minutes by default): set it above the retry delay plus your longest write.",
        "version_added": "0.1.0",
        "type": "boolean",
        "example": "False",
        "default": "True",
    }
    options["data_path"] = {  # read by airflow_ft_provider.pipeline when a DAG is parsed
        "description": "Where the partition data of pipelines that name no data_path flows: 'executors' "
        "between Spark's executors and S3, wherever they run; 'staged' through the Airflow worker's disk "
        "(Spark must share it; faster on one machine for data-heavy stages, and the checkpointed stages' "
        "whole feature set: see Running on a cluster); 's3a' through Spark's s3a connector (hadoop-aws "
        "on the cluster). A pipeline's or a stage's own data_path wins.",
        "version_added": "0.1.0",
        "type": "string",
        "example": "staged",
        "default": "executors",
    }
    options["executor_credentials"] = {  # read by airflow_ft_provider.hooks.partition_store
        "description": "Which credentials Spark's executors use to read and write the partition store "
        "(data_path 'executors'): 'connection' hands them the aws connection's credentials, frozen when "
        "the try starts, through no conf or log; 'executor' keeps every secret on the Airflow worker and "
        "leaves the executors to their own (an instance or pod role, their AWS_* variables).",
        "version_added": "0.1.0",
        "type": "string",
        "example": "executor",
        "default": "connection",
    }
    return options


def get_provider_info() -> dict[str, object]:
    _preload_stage_clients()
    return {
        "package-name": "airflow-ft-provider",
        "name": "Flink-style fault tolerance for Spark pipelines",
        "description": "Failover regions, re-consumable result partitions on S3 and Flink restart "
        "strategies for Spark batch pipelines run by Airflow.",
        "versions": [__version__],
        "integrations": [
            {"integration-name": PIPELINES, "tags": ["apache", "software"]},
            {"integration-name": PARTITIONS, "tags": ["aws", "software"]},
        ],
        "operators": [
            {
                "integration-name": PIPELINES,
                "python-modules": [
                    "airflow_ft_provider.operators.spark_stage",
                    "airflow_ft_provider.operators.auto_parallelism",
                ],
            },
        ],
        "hooks": [
            {"integration-name": PARTITIONS, "python-modules": ["airflow_ft_provider.hooks.partition_store"]},
        ],
        "sensors": [
            {"integration-name": PARTITIONS, "python-modules": ["airflow_ft_provider.sensors.partition"]},
        ],
        "triggers": [
            {"integration-name": PARTITIONS, "python-modules": ["airflow_ft_provider.triggers.partition"]},
        ],
        "extra-links": [
            "airflow_ft_provider.operators.spark_stage.RegionLink",
            "airflow_ft_provider.operators.spark_stage.PartitionsLink",
        ],
        # No "plugins" entry: the UI plugin is registered through the "airflow.plugins" entry point
        # (pyproject.toml), which Airflow always loads; listing it here too registers it twice.
        "config": {
            CONFIG_SECTION: {
                "description": "Cluster-wide defaults of the restart and failover strategies "
                "(Flink's keys) and of the result-partition store; a pipeline's own settings override them.",
                "options": _config_options(),
            }
        },
    }


def _preload_stage_clients() -> None:
    """Preload in the processes that fork task processes; never fails the providers' discovery."""
    try:
        from airflow_ft_provider.execution.preload import preload_if_configured

        preload_if_configured()
    except Exception:  # noqa: BLE001 - a missing client shows in the stage try, which loads it itself
        import logging

        logging.getLogger(__name__).warning("stage clients not preloaded", exc_info=True)


if __name__ == "__main__":  # provider.yaml, the form Airflow's own providers keep their metadata in
    import yaml

    print("# Generated by `python -m airflow_ft_provider.get_provider_info` (checked by")
    print("# tests/unit/test_get_provider_info.py): get_provider_info() is the source, built from the")
    print("# code's own defaults.")
    print(yaml.safe_dump(get_provider_info(), sort_keys=False, width=100), end="")
