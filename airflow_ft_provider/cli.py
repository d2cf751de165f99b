"""Command line for manual recovery control.

    airflow-ft restart-region --dag-id orders_etl --run-id manual__2026-... --task score [--store ...]
    airflow-ft history --dag-id orders_etl --run-id manual__2026-... [--store s3://lake/pipelines/]
    airflow-ft partitions --dag-id orders_etl --run-id manual__2026-...
    airflow-ft show --dag-id orders_etl --run-id manual__2026-... daily_revenue [--limit 20] [--parquet F]
    airflow-ft gc [--store s3://lake/pipelines/] [--aws-conn-id aws_default] [--pipeline orders_etl]

``restart-region`` restarts the task's failover region and every consumer region, re-using the
available upstream partitions (only missing ones are rebuilt). It clears through the Airflow REST API
(connection ``airflow_api``) and follows the pipeline the run stored in its partition store
(``--store``, default ``[ft_provider] partition_store_url``), as the UI does: no DAG file is parsed.
It does not count against the restart strategy. ``gc`` releases ended runs whose retention has
passed and removes orphaned attempt data older than ``partition_store_orphan_grace``
(``airflow_ft_provider/partitions/garbage.py``); each run's end already sweeps its own pipeline, so it
is for pipelines that no longer run (docs, *Partition store*: *A life cycle that runs itself*).

Manifests read are kept by ETag in ``$XDG_CACHE_HOME/airflow-ft/manifests``
(``partitions/manifest_cache.py``): the next command reads only those that changed.

Results go to stdout, one JSON object per line for ``history``, ``partitions``, ``show`` and
``restart-region`` (times as ISO-8601 in UTC); logs, warnings and errors go to stderr. Exit status:
0 done, 1 refused or failed (the reason on stderr), 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from airflow_ft_provider.model.description import PipelineDescription
    from airflow_ft_provider.partitions import S3PartitionStore

EPILOG = """results: stdout (JSON lines for history, partitions, show, restart-region); logs, errors: stderr.
exit status: 0 done, 1 refused or failed (the reason on stderr), 2 usage error."""
TIME_FIELDS = ("time", "restart_at", "decided_at")


def _task_argument(value: str) -> str:
    from airflow_ft_provider.failover.indexed_name import IndexedName

    try:
        if any(c.isspace() for c in value):
            raise ValueError(value)
        IndexedName.parse(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid task {value!r}: give a task id, or task_id[i] for map index i (e.g. score or score[3])"
        ) from None
    return value


def _store(args: argparse.Namespace) -> S3PartitionStore:
    """The store ``--store`` and ``--aws-conn-id`` name (default: ``[ft_provider] partition_store_url``
    and ``partition_store_conn_id``)."""
    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook
    from airflow_ft_provider.pipeline import cluster_store_conn_id

    return PartitionStoreHook(args.aws_conn_id or cluster_store_conn_id(), url=args.store).get_store()


def iso_times(event: Mapping[str, object]) -> dict[str, object]:
    """An event with its epoch-second times as ISO-8601 (UTC), for people and ``jq`` alike."""
    from airflow_ft_provider.run_results import iso_time

    return {
        key: iso_time(value)
        if key in TIME_FIELDS and isinstance(value, (int, float)) and not isinstance(value, bool)
        else value
        for key, value in event.items()
    }


def _logs_to_stderr(verbose: bool) -> None:
    """Airflow's logging writes to stdout; a command whose stdout is read by programs must not."""
    from airflow.sdk.log import configure_logging

    configure_logging(output=sys.stderr, log_level="INFO" if verbose else "WARNING")
    logging.getLogger().setLevel(logging.INFO if verbose else logging.WARNING)


def run() -> int:
    """The console script. File descriptor 1 is handed to the results alone: whatever else writes to
    stdout -- Airflow's logging, or the plugin manager warning while ``airflow`` is being imported,
    before any configuration of ours can act -- goes to stderr."""
    sys.stdout.flush()
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    try:
        return main(out=results)
    finally:
        results.flush()


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (also what the docs' command reference is generated from)."""
    parser = argparse.ArgumentParser(
        prog="airflow-ft",
        description=__doc__.split("\n\n")[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level (on stderr)")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("restart-region", "restart a task's region and its consumer regions"),
        ("history", "print the run's recovery decisions as JSON lines"),
        ("partitions", "list the run's partitions as JSON lines: state, producer try, rows, bytes"),
        ("show", "print a committed partition's rows as JSON lines (read and verified by the store)"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("--dag-id", required=True)
        command.add_argument("--run-id", required=True)
        command.add_argument(
            "--store",
            help="the pipeline's partition store, s3://bucket/prefix/ "
            "(default: [ft_provider] partition_store_url)",
        )
        command.add_argument(
            "--aws-conn-id",
            help="the store's aws connection (default: [ft_provider] partition_store_conn_id, aws_default)",
        )
        if name == "show":
            command.add_argument(
                "partition", help="RESULT, or RESULT[i] for map index i of a mapped producer"
            )
            command.add_argument("--limit", type=int, default=100, help="rows to print (default 100; 0: all)")
            command.add_argument(
                "--parquet", metavar="FILE", help="write all rows to this Parquet file instead"
            )
        if name == "restart-region":
            command.add_argument(
                "--task",
                required=True,
                type=_task_argument,
                help="a task id, with [i] for map index i; a mapped stage's name alone restarts the "
                "regions of all its map indexes",
            )
    gc = commands.add_parser("gc", help="release runs whose retention passed and orphaned attempt data")
    gc.add_argument("--store", help="s3://bucket/prefix/ (default: [ft_provider] partition_store_url)")
    gc.add_argument(
        "--aws-conn-id",
        help="the store's aws connection (default: [ft_provider] partition_store_conn_id, aws_default)",
    )
    gc.add_argument(
        "--pipeline",
        action="append",
        metavar="DAG_ID",
        help="only this pipeline (repeatable); default: every pipeline in the store",
    )
    return parser


def main(argv: list[str] | None = None, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    saved, sys.stdout = sys.stdout, out  # --help is a result too
    try:
        args = parser.parse_args(argv)
    finally:
        sys.stdout = saved
    _logs_to_stderr(args.verbose)
    if args.command == "gc":
        return _collect_garbage(parser, args, out)
    from airflow.sdk.exceptions import AirflowNotFoundException

    from airflow_ft_provider.hooks.airflow_api import (
        AirflowApiError,
        AirflowApiOutcomeUnknown,
        AirflowApiUnreachable,
    )
    from airflow_ft_provider.partitions.errors import PartitionNotFound, PartitionStoreError
    from airflow_ft_provider.partitions.manifest_cache import MANIFESTS, DiskTier, default_disk_folder
    from airflow_ft_provider.recovery.run_recovery import RunNotReady, RunRecovery

    # A command starts afresh each time: the manifests it read before, by ETag, are on disk
    MANIFESTS.disk = DiskTier(default_disk_folder())
    try:
        # The run's own pipeline, as its first stage try stored it: no DAG file is parsed here.
        store = _store(args)
        try:
            recovery = RunRecovery.for_reader(store, args.dag_id, args.run_id)
        except RunNotReady as err:
            raise ValueError(
                f"{err}: no stage try of it has started, or the pipeline has its own store (pass --store)"
            ) from None
        journal, description = recovery.journal, recovery.pipeline
        if args.command == "restart-region":
            description.tasks_named(args.task)  # a clear error for a name the pipeline lacks
            cleared = recovery.restart_regions(args.task, reason="airflow-ft restart-region")
            print(json.dumps({"task": args.task, "restarted": cleared}), file=out)  # []: nothing had started
        elif args.command == "partitions":
            from airflow_ft_provider.run_results import as_json, list_partitions

            for line in list_partitions(description, store, args.run_id, journal.events()):
                print(json.dumps(as_json(line)), file=out)
        elif args.command == "show":
            _show(args, store, description, out)
        else:
            for event in journal.events():
                print(json.dumps(iso_times(event.to_json()), sort_keys=True), file=out)
    except (
        ValueError,
        AirflowNotFoundException,
        AirflowApiError,
        AirflowApiOutcomeUnknown,
        AirflowApiUnreachable,
        PartitionStoreError,
        PartitionNotFound,
    ) as err:
        parser.exit(1, f"airflow-ft {args.command}: error: {err}\n")
    finally:
        MANIFESTS.disk = None  # the command's, not its caller's (a test calling main())
    return 0


def _show(
    args: argparse.Namespace, store: S3PartitionStore, description: PipelineDescription, out: TextIO
) -> None:
    """One partition's rows, through the store's reader (manifest, sizes and checksums verified)."""
    from airflow_ft_provider.partitions import RunRef
    from airflow_ft_provider.partitions.parquet import read_table
    from airflow_ft_provider.run_results import partition_rows

    if args.partition not in (known := description.graph.partition_ids()):
        raise ValueError(
            f"{args.partition!r} is not a partition of pipeline {args.dag_id!r}; partitions: "
            f"{', '.join(known[:50])} (a mapped producer's partitions are RESULT[i])"
        )
    result = description.graph.results[args.partition.split("[")[0]]
    if not result.result_type.is_reconsumable:
        raise ValueError(
            f"{args.partition!r} is pipelined: it lives for one execution of its region, never stored"
        )
    table = read_table(store, RunRef(args.dag_id, args.run_id).parse(args.partition))
    if args.parquet:
        import pyarrow.parquet as pq

        pq.write_table(table, args.parquet)
        print(
            json.dumps({"partition": args.partition, "rows": table.num_rows, "parquet": args.parquet}),
            file=out,
        )
        return
    for row in partition_rows(table, args.limit or None):
        print(json.dumps(row), file=out)


def _collect_garbage(parser: argparse.ArgumentParser, args: argparse.Namespace, out: TextIO) -> int:
    from airflow.sdk.exceptions import AirflowNotFoundException

    from airflow_ft_provider.partitions.errors import PartitionStoreError
    from airflow_ft_provider.partitions.garbage import collect

    try:
        store = _store(args)
        report = collect(store, args.pipeline)
    except (ValueError, AirflowNotFoundException, PartitionStoreError) as err:
        parser.exit(1, f"airflow-ft gc: error: {err}\n")
    for line in report.lines():
        print(line, file=out)
    return 0


if __name__ == "__main__":
    sys.exit(run())
