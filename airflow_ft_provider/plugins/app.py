"""The failover page's FastAPI app, mounted by the API server at ``/ft-failover``.

    GET  /                                  runs that have a recovery journal (HTML)
    GET  /runs/{dag_id}/{run_id}            one run: regions, partitions, history, strategy (HTML)
    GET  /api/runs                          the same list as JSON
    GET  /api/runs/{dag_id}/{run_id}        the run's data as JSON (see run_view.build_run_view)
    POST /api/runs/{dag_id}/{run_id}/restart  {"task": "score"}: restart that task's region and its
                                             consumer regions (as ``airflow-ft restart-region``)

Every route requires an Airflow login (JWT cookie of the UI, or a bearer token) and the DAG-level
permissions of Airflow's own routes, through Airflow's ``requires_access_dag``: a run's page needs read
access to the DAG's runs and task instances; a restart needs the permission to clear task instances
(what ``clearTaskInstances`` requires), is performed in-process as the calling user (plugins/clear.py,
named in Airflow's audit log), takes JSON only and, when authenticated by the session cookie, only from
a page of this server (Origin check: no cross-site forgery). The store and the pipeline a run names are
checked against the DAG's configuration first (plugins/trust.py). Pages render no credential (the store
by URL only; causes masked), escape everything they show, and may be framed by this origin only.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.api_fastapi.logging.decorators import action_logging
from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field
from sqlalchemy import select

from airflow_ft_provider.partitions.errors import PartitionStoreError
from airflow_ft_provider.plugins.run_lookup import dag_run, task_instance_rows, verified_recovery
from airflow_ft_provider.plugins.run_view import build_run_view
from airflow_ft_provider.recovery.journal import STORE_XCOM_KEY, DamagedJournal
from airflow_ft_provider.recovery.pending import RunState
from airflow_ft_provider.recovery.wording import mask_secrets

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)
PAGE = Path(__file__).with_name("static") / "failover.html"
RECENT_RUNS = 50
# How long the run's data waits for manifests (seconds): a run of 1,000 partitions answers in under a
# second; those not read by then show as "listed", and the page asks again (their reads go on and fill
# the process's manifest cache, bench/bench_failover_page.py)
MANIFEST_BUDGET = 0.3
RESTART_EVENT = "ft_restart_region"  # the audit log's event name for a restart from the page

can_read_runs = Depends(requires_access_dag("GET", DagAccessEntity.RUN))
can_read_task_instances = Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))
can_clear_tasks = Depends(requires_access_dag("PUT", DagAccessEntity.TASK_INSTANCE))
# Only the Airflow UI of this origin may show the pages in a frame (it does, as plugin tabs).
FRAMING = {
    "X-Frame-Options": "SAMEORIGIN",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
PAGE_CSP = (
    "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
)


class RestartRequest(BaseModel):
    task: str = Field(
        description="a task of the region to restart: a stage id (all map indexes of a mapped stage), "
        "or stage[i] for one map index",
        min_length=1,
        max_length=300,
    )


def _own_origins(request: Request) -> set[str]:
    origins = {f"{request.url.scheme}://{request.headers.get('host', '')}"}
    from airflow.configuration import conf

    if base := conf.get("api", "base_url", fallback=""):
        parts = urlsplit(base)
        origins.add(f"{parts.scheme}://{parts.netloc}")
    return origins


def same_origin_if_cookie(request: Request) -> None:
    """A browser sends the session cookie with requests from other sites too (SameSite=Lax still does for
    sibling subdomains), so a cookie-authenticated change must come from a page of this server: browsers
    send ``Origin`` with every POST. A bearer token is never attached by the browser: nothing to check."""
    if request.headers.get("authorization", "")[:7].lower() == "bearer ":
        return  # Airflow's get_user authenticates by the bearer token then, not by the cookie
    origin = request.headers.get("origin")
    if origin not in _own_origins(request) or request.headers.get("sec-fetch-site") not in (
        None,
        "same-origin",
    ):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"cross-site request refused: a restart authenticated by the session cookie must come from "
            f"a page of this Airflow (Origin {str(origin)[:100]!r}); API clients send "
            "'Authorization: Bearer <token>'",
        )


@lru_cache(maxsize=1)
def _page_template() -> str:
    return PAGE.read_text()


def _page(config: dict[str, object]) -> HTMLResponse:
    # JSON inside <script>: '<', '>' and '&' escaped so that no run id can close the element or open
    # a comment.
    data = json.dumps(config).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    nonce = secrets.token_urlsafe(16)
    html = _page_template().replace("__FT_NONCE__", nonce).replace("__FT_CONFIG__", data)
    return HTMLResponse(html, headers={"Content-Security-Policy": PAGE_CSP.format(nonce=nonce)})


def create_app() -> FastAPI:
    app = FastAPI(title="Failover (airflow-ft-provider)", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for name, value in FRAMING.items():
            response.headers.setdefault(name, value)
        response.headers.setdefault("Content-Security-Policy", "frame-ancestors 'self'")
        return response

    @app.get("/", response_class=HTMLResponse)
    def index(user: GetUserDep) -> HTMLResponse:
        return _page({"view": "runs"})

    @app.get(
        "/runs/{dag_id}/{run_id}",
        response_class=HTMLResponse,
        dependencies=[can_read_runs, can_read_task_instances],
    )
    def run_page(dag_id: str, run_id: str) -> HTMLResponse:
        return _page({"view": "run", "dag_id": dag_id, "run_id": run_id})

    @app.get("/api/runs", dependencies=[can_read_runs])
    def list_runs(user: GetUserDep, session: SessionDep) -> dict[str, object]:
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.models.dagrun import DagRun
        from airflow.models.xcom import XComModel

        readable = get_auth_manager().get_authorized_dag_ids(user=user, method="GET")
        rows = session.execute(
            select(DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.start_date)
            .where(
                DagRun.id.in_(select(XComModel.dag_run_id).where(XComModel.key == STORE_XCOM_KEY)),
                DagRun.dag_id.in_(readable),
            )
            .order_by(DagRun.start_date.desc())
            .limit(RECENT_RUNS)
        ).all()
        return {
            "runs": [
                {
                    "dag_id": r.dag_id,
                    "run_id": r.run_id,
                    "state": r.state,
                    "start_date": r.start_date.isoformat() if r.start_date else None,
                }
                for r in rows
            ]
        }

    @app.get("/api/runs/{dag_id}/{run_id}", dependencies=[can_read_runs, can_read_task_instances])
    def run_data(dag_id: str, run_id: str, session: SessionDep) -> dict[str, object]:
        run = dag_run(session, dag_id, run_id)
        recovery = verified_recovery(session, run)
        journal, description = recovery.journal, recovery.pipeline
        try:
            report = journal.store.check_graph(
                description.graph, dag_id, run_id, budget=MANIFEST_BUDGET, index=True
            )
        except Exception as err:  # the page still shows states and history without the store
            log.warning("partition availability of %s/%s unavailable: %s", dag_id, run_id, err)
            report = None
        try:
            state, damaged = journal.load_checked(description), ""
        except DamagedJournal as err:  # shown as such: the run's states and history still help
            state, damaged = RunState(), str(err)
        try:
            events = journal.events()
        except PartitionStoreError as err:
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                f"the run's recovery journal cannot be read: {mask_secrets(str(err))}",
            ) from None
        view = build_run_view(
            description,
            run_id,
            task_instances=task_instance_rows(session, dag_id, run_id),
            state=state,
            events=events,
            report=report,
            mask=mask_secrets,
        )
        view["store"] = journal.store.layout.url
        view["journal"] = {"damaged": bool(damaged), "reason": mask_secrets(damaged)}
        return view

    @app.post(
        "/api/runs/{dag_id}/{run_id}/restart",
        dependencies=[
            can_clear_tasks,
            Depends(same_origin_if_cookie),
            Depends(action_logging(RESTART_EVENT)),
        ],
    )
    def restart_region(
        dag_id: str,
        run_id: str,
        body: RestartRequest,
        request: Request,
        user: GetUserDep,
        session: SessionDep,
    ) -> dict[str, object]:
        from airflow_ft_provider.plugins.clear import CallerClears

        # JSON only: a cross-site form post cannot send it without a CORS preflight (CSRF).
        if not request.headers.get("content-type", "").startswith("application/json"):
            raise HTTPException(
                status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, "send the request body as application/json"
            )
        run = dag_run(session, dag_id, run_id)
        # Cleared by this process as the caller, never with the airflow_api connection's account.
        caller = CallerClears(session=session, user=user, dag_id=dag_id, run_id=run_id)
        recovery = verified_recovery(session, run, api=caller)
        try:
            recovery.pipeline.tasks_named(body.task)
        except ValueError as err:
            raise HTTPException(status.HTTP_400_BAD_REQUEST, str(err)) from None
        name = user.get_name()
        try:
            cleared = recovery.restart_regions(
                body.task, reason=f"restart region from the failover page by {name}", user=name
            )
        except DamagedJournal as err:  # raised before anything is cleared or written
            raise HTTPException(
                status.HTTP_409_CONFLICT, f"restart refused, nothing was cleared: {mask_secrets(str(err))}"
            ) from None
        log.warning(
            "user %s restarted the region of %s in %s/%s: cleared %s",
            name,
            body.task,
            dag_id,
            run_id,
            cleared,
        )
        return {"task": body.task, "cleared": cleared}

    return app


app = create_app()
