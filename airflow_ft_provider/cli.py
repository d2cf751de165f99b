"""Command line for manual recovery control.

    airflow-ft restart-region --dag-id orders_etl --run-id manual__2026-... --task score
    airflow-ft history --dag-id orders_etl --run-id manual__2026-...
    airflow-ft gc [--store s3://lake/pipelines/] [--aws-conn-id aws_default] [--pipeline orders_etl]

``restart-region`` restarts the task's failover region and every consumer region, re-using the
available upstream partitions (only missing ones are rebuilt). It clears through the Airflow REST API
(connection ``airflow_api``) and reads the DAG folder to know the pipeline. It does not count
against the restart strategy. ``gc`` releases succeeded runs whose ``partition_store_retention`` has
passed and removes orphaned attempt data older than ``partition_store_orphan_grace``
(``airflow_ft_provider/partitions/garbage.py``); run it on a schedule (README, *Partition store*).
"""

from __future__ import annotations

import argparse
import json
import sys


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


def _pipeline(dag_id: str, dags_folder: str | None):
    from pathlib import Path

    from airflow.dag_processing.dagbag import BundleDagBag
    from airflow.sdk import conf

    from airflow_ft_provider.pipeline import pipeline_for

    folder = dags_folder or conf.get("core", "dags_folder")
    # As Airflow's own CLI: the folder goes on sys.path, so DAG files can import their neighbours.
    bag = BundleDagBag(dag_folder=folder, bundle_path=Path(folder))
    if dag_id not in bag.dags:
        raise SystemExit(f"DAG {dag_id!r} not found in {folder}; import errors: {bag.import_errors or 'none'}")
    return pipeline_for(dag_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="airflow-ft", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("restart-region", "restart a task's region and its consumer regions"),
                       ("history", "print the run's recovery decisions as JSON lines")):
        command = commands.add_parser(name, help=text)
        command.add_argument("--dag-id", required=True)
        command.add_argument("--run-id", required=True)
        command.add_argument("--dags-folder", help="default: [core] dags_folder")
        if name == "restart-region":
            command.add_argument("--task", required=True, type=_task_argument,
                                 help="a task id, with [i] for map index i")
    gc = commands.add_parser("gc", help="release runs whose retention passed and orphaned attempt data")
    gc.add_argument("--store", help="s3://bucket/prefix/ (default: [ft_provider] partition_store_url)")
    gc.add_argument("--aws-conn-id", default="aws_default", help="the store's aws connection")
    gc.add_argument("--pipeline", action="append", metavar="DAG_ID",
                    help="only this pipeline (repeatable); default: every pipeline in the store")
    args = parser.parse_args(argv)
    if args.command == "gc":
        return _collect_garbage(parser, args)
    from airflow.sdk.exceptions import AirflowNotFoundException

    from airflow_ft_provider.hooks.airflow_api import (
        AirflowApiError,
        AirflowApiOutcomeUnknown,
        AirflowApiUnreachable,
    )

    try:
        description = _pipeline(args.dag_id, args.dags_folder).description
        if args.command == "restart-region":
            if args.task not in (tasks := description.graph.task_ids()):  # said before anything is read
                raise ValueError(f"{args.task!r} is not a task of pipeline {args.dag_id!r}; tasks: "
                                 f"{', '.join(tasks[:50])}")
            failover = description.region_failover(args.run_id)
            cleared = failover.restart_regions(args.task, reason="airflow-ft restart-region")
            print(f"restarted: {', '.join(cleared) if cleared else 'nothing had started yet'}")
        else:
            for event in description.region_failover(args.run_id).journal.events():
                print(json.dumps(event, sort_keys=True))
    except (ValueError, AirflowNotFoundException, AirflowApiError, AirflowApiOutcomeUnknown,
            AirflowApiUnreachable) as err:
        parser.exit(1, f"airflow-ft {args.command}: error: {err}\n")
    return 0


def _collect_garbage(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from airflow.sdk.exceptions import AirflowNotFoundException

    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook
    from airflow_ft_provider.partitions.errors import PartitionStoreError
    from airflow_ft_provider.partitions.garbage import collect

    try:
        store = PartitionStoreHook(args.aws_conn_id, url=args.store).get_store()
        report = collect(store, args.pipeline)
    except (ValueError, AirflowNotFoundException, PartitionStoreError) as err:
        parser.exit(1, f"airflow-ft gc: error: {err}\n")
    for line in report.lines():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
