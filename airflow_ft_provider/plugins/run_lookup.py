"""What the failover page's routes look up in the metadata DB before they show or restart a run: the run,
its stage tries' store pointer, its task instances, and its recovery checked against the DAG's
configuration (plugins/trust.py). Every refusal is an HTTPException with the status the route answers."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException, status
from sqlalchemy import select

from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.errors import PartitionStoreError
from airflow_ft_provider.plugins.trust import RunNotReady, StorePointer, UntrustedRun, trusted_run
from airflow_ft_provider.recovery.journal import STORE_XCOM_KEY
from airflow_ft_provider.recovery.run_recovery import RunRecovery
from airflow_ft_provider.recovery.wording import mask_secrets

if TYPE_CHECKING:
    from airflow.models.dagrun import DagRun
    from sqlalchemy.orm import Session

    from airflow_ft_provider.hooks.task_instances import TaskInstanceApi

log = logging.getLogger(__name__)


def store_pointer(session: Session, dag_id: str, run_id: str) -> object:
    """What the run's stage tries pushed as the ``ft_store`` XCom (None: no stage started); unverified."""
    from airflow.models.xcom import XComModel

    row = session.scalars(
        select(XComModel)
        .where(XComModel.dag_id == dag_id, XComModel.run_id == run_id, XComModel.key == STORE_XCOM_KEY)
        .order_by(XComModel.timestamp.desc())
        .limit(1)
    ).first()
    value = XComModel.deserialize_value(row) if row is not None else None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value


def dag_run(session: Session, dag_id: str, run_id: str) -> DagRun:
    from airflow.models.dagrun import DagRun

    run = session.scalar(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"DAG {dag_id!r} has no run {run_id!r}")
    try:
        RunRef(dag_id, run_id)
    except ValueError as err:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            f"run {run_id!r} of DAG {dag_id!r} cannot be a failover pipeline run: {err}",
        ) from None
    return run


def server_store(conf: Any) -> StorePointer | None:
    """The API server's own default store and connection, for DAGs whose configuration names none."""
    from airflow_ft_provider.pipeline import cluster_store_conn_id

    url = conf.get("ft_provider", "partition_store_url", fallback=None)
    return StorePointer(url, cluster_store_conn_id()) if url else None


def verified_recovery(session: Session, run: DagRun, *, api: TaskInstanceApi | None = None) -> RunRecovery:
    """The run's recovery, its store and stored pipeline checked against its DAG's configuration
    (plugins/trust.py); a restart clears through ``api``."""
    from airflow.configuration import conf
    from airflow.models.dagbag import DBDagBag
    from airflow.sdk.exceptions import AirflowNotFoundException

    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    dag = DBDagBag().get_dag_for_run(run, session=session)
    if dag is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"DAG {run.dag_id!r} is not in the metadata DB (not parsed)"
        )
    try:
        return trusted_run(
            dag=dag,
            run_id=run.run_id,
            pointer=store_pointer(session, run.dag_id, run.run_id),
            default=server_store(conf),
            max_parallelism=conf.getint("core", "max_map_length", fallback=1024),
            store_factory=lambda conn_id, url: PartitionStoreHook(conn_id, url=url).get_store(),
            api=api,
        )
    except RunNotReady as err:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(err)) from None
    except UntrustedRun as err:
        log.warning("refused %s/%s: %s", run.dag_id, run.run_id, err)
        raise HTTPException(status.HTTP_409_CONFLICT, mask_secrets(str(err))) from None
    except AirflowNotFoundException as err:  # the connection the DAG names is not defined here
        raise HTTPException(status.HTTP_409_CONFLICT, mask_secrets(str(err))) from None
    except PartitionStoreError as err:  # S3 unreachable, access denied: the store's own typed errors
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"the run's partition store cannot be read: {mask_secrets(str(err))}",
        ) from None
    except (
        ValueError
    ) as err:  # a damaged stored description (the journal's parsers raise ValueError subclasses)
        raise HTTPException(
            status.HTTP_409_CONFLICT, f"the run's stored pipeline is damaged: {mask_secrets(str(err))}"
        ) from None


def task_instance_rows(session: Session, dag_id: str, run_id: str) -> list[dict[str, object]]:
    from airflow.models.taskinstance import TaskInstance as TI

    rows = session.execute(
        select(TI.task_id, TI.map_index, TI.state, TI.try_number, TI.start_date, TI.end_date).where(
            TI.dag_id == dag_id, TI.run_id == run_id
        )
    ).all()
    return [
        {
            "task_id": r.task_id,
            "map_index": r.map_index,
            "state": r.state,
            "try_number": r.try_number,
            "start_date": r.start_date.isoformat() if r.start_date else None,
            "end_date": r.end_date.isoformat() if r.end_date else None,
        }
        for r in rows
    ]
