"""The failover page's FastAPI app, mounted by the API server at ``/ft-failover``.

    GET  /                                  runs that have a recovery journal (HTML)
    GET  /runs/{dag_id}/{run_id}            one run: regions, partitions, history, strategy (HTML)
    GET  /api/runs                          the same list as JSON
    GET  /api/runs/{dag_id}/{run_id}        the run's data as JSON (see run_view.build_run_view)
    POST /api/runs/{dag_id}/{run_id}/restart  {"task": "score"}: restart that task's region and its
                                             consumer regions (as ``airflow-ft restart-region``)

Every route requires an Airflow login (JWT cookie of the UI, or a bearer token) through Airflow's own
``requires_access_dag`` dependencies: reading needs read access to the DAG's runs, restarting needs the
permission to clear task instances (what ``clearTaskInstances`` requires). Pages render no credential:
the store is named by URL and connection id only.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field
from sqlalchemy import select

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.plugins.run_view import build_run_view
from airflow_ft_provider.policies.recovery_journal import STORE_XCOM_KEY, RecoveryJournal

log = logging.getLogger(__name__)
PAGE = Path(__file__).with_name("static") / "failover.html"
RECENT_RUNS = 50

can_read_runs = Depends(requires_access_dag("GET", DagAccessEntity.RUN))
can_clear_tasks = Depends(requires_access_dag("PUT", DagAccessEntity.TASK_INSTANCE))


class RestartRequest(BaseModel):
    task: str = Field(description="a task of the region to restart: a stage id, or stage[i] for a map index",
                      min_length=1, max_length=300)


def _store_pointer(session, dag_id: str, run_id: str) -> dict[str, str] | None:
    """Where the run's store is, from the ``ft_store`` XCom its stage tries pushed (None: none ran)."""
    from airflow.models.xcom import XComModel

    row = session.scalars(
        select(XComModel).where(XComModel.dag_id == dag_id, XComModel.run_id == run_id,
                                XComModel.key == STORE_XCOM_KEY).order_by(XComModel.timestamp.desc()).limit(1)
    ).first()
    value = XComModel.deserialize_value(row) if row is not None else None
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict) or not isinstance(value.get("url"), str):
        return None
    return value


def _journal(session, dag_id: str, run_id: str) -> RecoveryJournal:
    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    pointer = _store_pointer(session, dag_id, run_id)
    if pointer is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"no stage of run {run_id!r} of DAG {dag_id!r} has started yet: nothing to show")
    store = PartitionStoreHook(str(pointer.get("aws_conn_id") or "aws_default"), url=pointer["url"]).get_store()
    return RecoveryJournal(store, RunRef(dag_id, run_id))


def _description(journal: RecoveryJournal):
    try:
        description = journal.description()
    except ValueError as err:
        raise HTTPException(status.HTTP_500_INTERNAL_SERVER_ERROR, f"the run's stored pipeline is damaged: {err}")
    if description is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "the run has no stored pipeline description yet")
    return description


def _task_instances(session, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    from airflow.models.taskinstance import TaskInstance as TI

    rows = session.execute(
        select(TI.task_id, TI.map_index, TI.state, TI.try_number, TI.start_date, TI.end_date)
        .where(TI.dag_id == dag_id, TI.run_id == run_id)
    ).all()
    return [
        {"task_id": r.task_id, "map_index": r.map_index, "state": r.state, "try_number": r.try_number,
         "start_date": r.start_date.isoformat() if r.start_date else None,
         "end_date": r.end_date.isoformat() if r.end_date else None}
        for r in rows
    ]


def _run_exists(session, dag_id: str, run_id: str) -> None:
    from airflow.models.dagrun import DagRun

    if session.scalar(select(DagRun.id).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"DAG {dag_id!r} has no run {run_id!r}")


@lru_cache(maxsize=1)
def _page_template() -> str:
    return PAGE.read_text()


def _page(config: dict[str, Any]) -> HTMLResponse:
    # JSON inside <script>: '<' escaped so that no run id can close the element.
    data = json.dumps(config).replace("<", "\\u003c")
    return HTMLResponse(_page_template().replace("__FT_CONFIG__", data))


def create_app() -> FastAPI:
    app = FastAPI(title="Failover (airflow-ft-provider)", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def index(user: GetUserDep) -> HTMLResponse:
        return _page({"view": "runs"})

    @app.get("/runs/{dag_id}/{run_id}", response_class=HTMLResponse, dependencies=[can_read_runs])
    def run_page(dag_id: str, run_id: str) -> HTMLResponse:
        return _page({"view": "run", "dag_id": dag_id, "run_id": run_id})

    @app.get("/api/runs")
    def list_runs(user: GetUserDep, session: SessionDep) -> dict[str, Any]:
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.models.dagrun import DagRun
        from airflow.models.xcom import XComModel

        readable = get_auth_manager().get_authorized_dag_ids(user=user, method="GET")
        rows = session.execute(
            select(DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.start_date)
            .where(DagRun.id.in_(select(XComModel.dag_run_id).where(XComModel.key == STORE_XCOM_KEY)),
                   DagRun.dag_id.in_(readable))
            .order_by(DagRun.start_date.desc()).limit(RECENT_RUNS)
        ).all()
        return {"runs": [{"dag_id": r.dag_id, "run_id": r.run_id, "state": r.state,
                          "start_date": r.start_date.isoformat() if r.start_date else None} for r in rows]}

    @app.get("/api/runs/{dag_id}/{run_id}", dependencies=[can_read_runs])
    def run_data(dag_id: str, run_id: str, session: SessionDep) -> dict[str, Any]:
        _run_exists(session, dag_id, run_id)
        journal = _journal(session, dag_id, run_id)
        description = _description(journal)
        try:
            report = journal.store.check_graph(description.graph, dag_id, run_id)
        except Exception as err:  # the page still shows states and history without the store
            log.warning("partition availability of %s/%s unavailable: %s", dag_id, run_id, err)
            report = None
        view = build_run_view(description, run_id, task_instances=_task_instances(session, dag_id, run_id),
                              state=journal.load(), events=journal.events(), report=report)
        view["store"] = journal.store.layout.url
        return view

    @app.post("/api/runs/{dag_id}/{run_id}/restart", dependencies=[can_clear_tasks])
    def restart_region(dag_id: str, run_id: str, body: RestartRequest, request: Request, user: GetUserDep,
                       session: SessionDep) -> dict[str, Any]:
        # JSON only: a cross-site form post cannot send it without a CORS preflight (CSRF).
        if not request.headers.get("content-type", "").startswith("application/json"):
            raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, "send the request body as application/json")
        _run_exists(session, dag_id, run_id)
        journal = _journal(session, dag_id, run_id)
        description = _description(journal)
        tasks = description.graph.task_ids()
        if body.task not in tasks:
            raise HTTPException(status.HTTP_400_BAD_REQUEST,
                                f"{body.task!r} is not a task of pipeline {dag_id!r}; tasks: {', '.join(tasks[:50])}")
        failover = description.region_failover(run_id, store=journal.store)
        name = user.get_name()
        cleared = failover.restart_regions(body.task, reason=f"restart region from the failover page by {name}",
                                           user=name)
        log.warning("user %s restarted the region of %s in %s/%s: cleared %s", name, body.task, dag_id, run_id,
                    cleared)
        return {"task": body.task, "cleared": cleared}

    return app


app = create_app()
