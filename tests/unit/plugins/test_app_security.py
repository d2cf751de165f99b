"""The failover page's app behind Airflow's real auth dependencies, on a real metadata DB and S3 store.

A migrated SQLite DB holds two pipeline DAGs serialized by ``airflow dags reserialize`` (so their
partition Assets name the module's store), runs with task instances and ``ft_store`` XComs; requests go
through FastAPI's TestClient with JWTs of Airflow's SimpleAuthManager.

    A --a--> B --b--> C          (both DAGs: seed 002, all blocking)
               \\--b--> D
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output
from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.journal import STORE_XCOM_KEY, RecoveryJournal
from airflow_ft_provider.recovery.journal_schema import event_from_json
from ft_harness.data.journal_records import stored_events

pytestmark = [pytest.mark.s3, pytest.mark.airflow]

DAG, OTHER, OWN_CONN = "ft_sec_seed", "ft_sec_other", "ft_sec_own_conn"
FIXED = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 5,
    "restart-strategy.fixed-delay.delay": "2 s",
}
DAG_FILE = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline

for dag_id in ("{dag}", "{other}"):
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
        with FailoverPipeline(restart_strategy={fixed!r}):
            SparkStageOperator(task_id="A", application="x.py", outputs=["a"])
            SparkStageOperator(task_id="B", application="x.py", inputs=["a"], outputs=["b"])
            SparkStageOperator(task_id="C", application="x.py", inputs=["b"], outputs=["c"])
            SparkStageOperator(task_id="D", application="x.py", inputs=["b"], outputs=["d"])

with DAG("{own_conn}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    with FailoverPipeline(restart_strategy={fixed!r}, aws_conn_id="ft_sec_store"):
        SparkStageOperator(task_id="A", application="x.py", outputs=["a"])
        SparkStageOperator(task_id="B", application="x.py", inputs=["a"], outputs=["b"])
        SparkStageOperator(task_id="C", application="x.py", inputs=["b"], outputs=["c"])
        SparkStageOperator(task_id="D", application="x.py", inputs=["b"], outputs=["d"])
"""
SECRET = "ft-test-jwt-secret-" + "x" * 64
HOSTILE = "</script><script>alert('ft')</script>\"'&<!--"
HOSTILE_ID = "\"><svg onload=alert(1)><script>alert('ft')<!--&amp;"  # no '/': an id is one path segment


def description(dag_id: str = DAG, **changes: Any) -> PipelineDescription:
    stages = [
        StageDeclaration("A", 1, (), (Output("a"),)),
        StageDeclaration("B", 1, (Input("a"),), (Output("b"),)),
        StageDeclaration("C", 1, (Input("b"),), (Output("c"),)),
        StageDeclaration("D", 1, (Input("b"),), (Output("d"),)),
    ]
    return PipelineDescription(dag_id, stages, restart_config=FIXED, **changes)


class Airflow:
    """The module's metadata DB, store and users; makes runs as a pipeline's first stage try would."""

    def __init__(self, store: S3PartitionStore, store_url: str) -> None:
        self.store, self.store_url = store, store_url

    def token(self, username: str, role: str | None = "admin") -> str:
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

        return get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=username, role=role))

    def run(
        self,
        dag_id: str = DAG,
        *,
        run_id: str | None = None,
        states: dict[str, str] | None = None,
        pointer: Any = "default",
        stored: PipelineDescription | None = None,
    ) -> str:
        from airflow.models.dagbag import DBDagBag
        from airflow.models.taskinstance import TaskInstance as TI
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        from airflow.utils.state import DagRunState
        from airflow.utils.types import DagRunTriggeredByType, DagRunType
        from sqlalchemy import select, update

        run_id = run_id or f"manual__{uuid.uuid4().hex[:8]}"
        with create_session() as session:
            dag = DBDagBag().get_latest_version_of_dag(dag_id, session=session)
            dag.create_dagrun(
                run_id=run_id,
                run_type=DagRunType.MANUAL,
                triggered_by=DagRunTriggeredByType.TEST,
                state=DagRunState.RUNNING,
                run_after=dag.start_date,
                session=session,
            )
            for task, state in (
                states or {"A": "success", "B": "success", "C": "failed", "D": "running"}
            ).items():
                session.execute(
                    update(TI)
                    .where(TI.dag_id == dag_id, TI.run_id == run_id, TI.task_id == task)
                    .values(state=state, try_number=1)
                )
            if pointer == "default":
                pointer = {"url": self.store_url, "aws_conn_id": "aws_default"}
            if pointer is not None:
                XComModel.set(
                    STORE_XCOM_KEY, pointer, dag_id=dag_id, task_id="A", run_id=run_id, session=session
                )
            assert session.scalar(
                select(TI.id).where(TI.dag_id == dag_id, TI.run_id == run_id, TI.task_id == "B")
            )
        if "/" not in run_id and run_id not in (".", ".."):
            RecoveryJournal(self.store, RunRef(dag_id, run_id)).store_description(
                stored or description(dag_id)
            )
        return run_id

    def tries(self, dag_id: str, run_id: str) -> dict[str, tuple[str | None, str]]:
        from airflow.models.taskinstance import TaskInstance as TI
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            rows = session.execute(
                select(TI.task_id, TI.state, TI.id).where(TI.dag_id == dag_id, TI.run_id == run_id)
            )
            return {r.task_id: (r.state, str(r.id)) for r in rows}

    def audit(self, dag_id: str, run_id: str) -> list[tuple[str, str]]:
        from airflow.models.log import Log
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            rows = session.execute(
                select(Log.event, Log.owner).where(Log.dag_id == dag_id, Log.run_id == run_id)
            )
            return [(r.event, r.owner) for r in rows]


@pytest.fixture(scope="module")
def airflow(s3_endpoint, tmp_path_factory) -> Iterator[Airflow]:
    """Airflow configured in this process for the module (and restored after): DB, auth, connections."""
    from airflow import settings
    from airflow.api_fastapi import app as api_app
    from airflow.configuration import conf

    home = tmp_path_factory.mktemp("airflow-home")
    bucket = f"ft-sec-{uuid.uuid4().hex[:10]}"
    s3_endpoint.client().create_bucket(Bucket=bucket)
    store_url = f"s3://{bucket}/pipelines/"
    (home / "dags").mkdir()
    (home / "dags" / "ft_sec_dags.py").write_text(
        DAG_FILE.format(dag=DAG, other=OTHER, own_conn=OWN_CONN, fixed=FIXED)
    )
    db_url = f"sqlite:///{home}/airflow.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=db_url,
        AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL=store_url,
    )
    airflow_bin = str(Path(sys.executable).with_name("airflow"))
    for argv in (["db", "migrate"], ["dags", "reserialize"]):
        done = subprocess.run(
            [airflow_bin, *argv], env=env, cwd=home, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    settings_before = {
        (s, k): conf.get(s, k, fallback=None)
        for s, k in (
            ("database", "sql_alchemy_conn"),
            ("api_auth", "jwt_secret"),
            ("core", "auth_manager"),
            ("core", "simple_auth_manager_all_admins"),
            ("ft_provider", "partition_store_url"),
            ("api", "base_url"),
        )
    }
    aws = json.dumps(
        {
            "conn_type": "aws",
            "login": s3_endpoint.access_key,
            "password": s3_endpoint.secret_key,
            "extra": {"endpoint_url": s3_endpoint.url, "region_name": s3_endpoint.region},
        }
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_AWS_DEFAULT", aws)
        for (section, key), value in {
            ("database", "sql_alchemy_conn"): db_url,
            ("api_auth", "jwt_secret"): SECRET,
            (
                "core",
                "auth_manager",
            ): "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            ("core", "simple_auth_manager_all_admins"): "False",
            ("ft_provider", "partition_store_url"): "",
            ("api", "base_url"): "http://airflow.example:8080/",
        }.items():
            conf.set(section, key, value)
        settings.dispose_orm()
        settings.configure_vars()
        settings.configure_orm()
        manager_before = api_app._AuthManagerState.instance
        api_app._AuthManagerState.instance = None
        api_app.create_auth_manager()
        client = s3_endpoint.client()
        try:
            yield Airflow(S3PartitionStore(client, store_url), store_url)
        finally:
            api_app._AuthManagerState.instance = manager_before
            settings.dispose_orm()
            for (section, key), value in settings_before.items():
                if value is None:
                    conf.remove_option(section, key)
                else:
                    conf.set(section, key, value)
            settings.configure_vars()
            settings.configure_orm()


@pytest.fixture
def web(airflow):
    from fastapi.testclient import TestClient

    from airflow_ft_provider.plugins.app import create_app

    with TestClient(create_app(), base_url="http://airflow.example:8080") as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def restart(web, run_id: str, *, dag_id: str = DAG, task: str = "B", **kwargs: Any):
    return web.post(f"/api/runs/{dag_id}/{run_id}/restart", json={"task": task}, **kwargs)


# -- who may do what -------------------------------------------------------------------------------
def test_every_route_needs_a_login_and_the_dags_permissions(airflow, web):
    run_id = airflow.run()
    routes = [
        ("GET", "/"),
        ("GET", f"/runs/{DAG}/{run_id}"),
        ("GET", "/api/runs"),
        ("GET", f"/api/runs/{DAG}/{run_id}"),
        ("POST", f"/api/runs/{DAG}/{run_id}/restart"),
    ]
    for method, path in routes:
        assert web.request(method, path, json={"task": "B"}).status_code == 401, path
        assert web.request(method, path, json={"task": "B"}, headers=bearer("forged")).status_code == 403, (
            path
        )
        nobody = web.request(
            method, path, json={"task": "B"}, headers=bearer(airflow.token("nobody", role=None))
        )
        assert nobody.status_code == (200 if path == "/" else 403), (path, nobody.text)
    viewer = bearer(airflow.token("vera", role="viewer"))
    assert web.get(f"/api/runs/{DAG}/{run_id}", headers=viewer).status_code == 200
    assert restart(web, run_id, headers=viewer).status_code == 403
    assert {state for state, _ in airflow.tries(DAG, run_id).values()} == {"success", "failed", "running"}


def test_task_instance_states_need_task_instance_read(airflow, web, monkeypatch):
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity

    manager = get_auth_manager()
    allowed = manager.is_authorized_dag

    def runs_but_not_task_instances(*, method, user, access_entity=None, details=None):
        if user.get_name() == "rita" and access_entity is DagAccessEntity.TASK_INSTANCE:
            return False
        return allowed(method=method, user=user, access_entity=access_entity, details=details)

    monkeypatch.setattr(manager, "is_authorized_dag", runs_but_not_task_instances)
    run_id = airflow.run()
    rita = bearer(airflow.token("rita", role="viewer"))
    assert web.get(f"/api/runs/{DAG}/{run_id}", headers=rita).status_code == 403
    assert web.get(f"/runs/{DAG}/{run_id}", headers=rita).status_code == 403
    assert web.get("/api/runs", headers=rita).status_code == 200  # run states only: DAG-run read suffices


def test_a_restart_clears_as_the_caller_and_the_audit_log_names_them(airflow, web):
    run_id = airflow.run()
    before = airflow.tries(DAG, run_id)
    response = restart(web, run_id, headers=bearer(airflow.token("ada")))
    assert response.status_code == 200, response.text
    assert response.json()["cleared"] == ["B", "C", "D"]
    after = airflow.tries(DAG, run_id)
    assert {t for t in after if after[t][1] != before[t][1]} == {"B", "C", "D"}  # each cleared once
    assert after["D"][0] == "restarting" and after["A"] == before["A"]
    assert airflow.audit(DAG, run_id) == [("ft_restart_region", "ada")]
    [event] = stored_events(RecoveryJournal(airflow.store, RunRef(DAG, run_id)))
    assert (event["kind"], event["user"], event["cleared"]) == ("manual", "ada", ["B", "C", "D"])


def test_a_cookie_authenticated_restart_must_come_from_this_origin(airflow, web):
    run_id = airflow.run()
    before = airflow.tries(DAG, run_id)
    web.cookies.set("_token", airflow.token("ada"))
    try:
        for headers in (
            {},
            {"Origin": "https://evil.example"},
            {"Origin": "null"},
            {"Origin": "http://airflow.example:8080", "Sec-Fetch-Site": "cross-site"},
        ):
            refused = restart(web, run_id, headers=headers)
            assert refused.status_code == 403 and "cross-site request refused" in refused.text, (
                headers,
                refused.text,
            )
        assert airflow.tries(DAG, run_id) == before
        ok = restart(
            web, run_id, headers={"Origin": "http://airflow.example:8080", "Sec-Fetch-Site": "same-origin"}
        )
        assert ok.status_code == 200, ok.text
    finally:
        web.cookies.clear()


def test_a_form_post_is_refused(airflow, web):
    run_id = airflow.run()
    before = airflow.tries(DAG, run_id)
    form = web.post(
        f"/api/runs/{DAG}/{run_id}/restart", data={"task": "B"}, headers=bearer(airflow.token("ada"))
    )
    assert form.status_code in (415, 422)
    assert airflow.tries(DAG, run_id) == before


# -- what the API server trusts ---------------------------------------------------------------------
def test_a_description_of_another_dag_is_refused(airflow, web):
    """A user allowed to clear DAG A must not make the server clear DAG B (or act on B's description)."""
    victim = airflow.run(OTHER)
    run_id = airflow.run(DAG, stored=description(OTHER))
    victim_before, before = airflow.tries(OTHER, victim), airflow.tries(DAG, run_id)
    ada = bearer(airflow.token("ada"))
    refused = restart(web, run_id, headers=ada)
    assert refused.status_code == 409 and f"is of DAG '{OTHER}', not '{DAG}'" in refused.text
    assert web.get(f"/api/runs/{DAG}/{run_id}", headers=ada).status_code == 409
    assert (airflow.tries(OTHER, victim), airflow.tries(DAG, run_id)) == (victim_before, before)


class RecordingEndpoint:
    """An HTTP server that records every request and answers 403, standing in for the S3 endpoint of a
    connection the API server holds for something else."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests: list[str] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                endpoint.requests.append(
                    f"{self.command} {self.path} {self.headers.get('Authorization', '')[:40]}"
                )
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _record

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def privileged_endpoint(monkeypatch) -> Iterator[RecordingEndpoint]:
    """Connection ``ft_privileged`` (defined on the server, for another purpose) to a recording endpoint."""
    endpoint = RecordingEndpoint()
    monkeypatch.setenv(
        "AIRFLOW_CONN_FT_PRIVILEGED",
        json.dumps(
            {
                "conn_type": "aws",
                "login": "AKIAPRIVILEGED",
                "password": "privileged-secret",
                "extra": {"endpoint_url": endpoint.url, "region_name": "us-east-1"},
            }
        ),
    )
    yield endpoint
    endpoint.close()


@pytest.mark.parametrize(
    "pointer",
    [
        {"url": "s3://attacker-bucket/x/", "aws_conn_id": "aws_default"},
        "store_with_another_connection",
    ],
    ids=["another-store", "another-connection"],
)
def test_an_xcom_that_points_elsewhere_is_not_used(airflow, web, pointer, privileged_endpoint):
    if pointer == "store_with_another_connection":  # a connection the server has, for more than this store
        pointer = {"url": airflow.store_url, "aws_conn_id": "ft_privileged"}
    run_id = airflow.run(pointer=pointer)
    before = airflow.tries(DAG, run_id)
    ada = bearer(airflow.token("ada"))
    for response in (web.get(f"/api/runs/{DAG}/{run_id}", headers=ada), restart(web, run_id, headers=ada)):
        assert response.status_code == 409, response.text
    assert airflow.tries(DAG, run_id) == before
    assert stored_events(RecoveryJournal(airflow.store, RunRef(DAG, run_id))) == []
    assert privileged_endpoint.requests == []  # no request signed with the connection the XCom named


def test_a_refusal_does_not_tell_whether_the_named_connection_exists(airflow, web, privileged_endpoint):
    ada = bearer(airflow.token("ada"))
    answers = []
    for conn_id in ("ft_privileged", "ft_no_such_connection"):
        run_id = airflow.run(
            run_id=f"manual__probe_{conn_id}", pointer={"url": airflow.store_url, "aws_conn_id": conn_id}
        )
        for response in (
            web.get(f"/api/runs/{DAG}/{run_id}", headers=ada),
            restart(web, run_id, headers=ada),
        ):
            assert response.status_code == 409, response.text
            answers.append(response.text.replace(conn_id, "<conn>").replace(run_id, "<run>"))
    assert answers[:2] == answers[2:]
    assert "configured with store" in answers[0] and "connection 'aws_default'" in answers[0]
    assert privileged_endpoint.requests == []


def test_a_pipeline_with_its_own_connection_is_read_with_it(airflow, web, monkeypatch):
    """The DAG's partition Assets name its connection; the server reads the run with that one only."""
    monkeypatch.setenv("AIRFLOW_CONN_FT_SEC_STORE", os.environ["AIRFLOW_CONN_AWS_DEFAULT"])
    ada = bearer(airflow.token("ada"))
    own = airflow.run(
        OWN_CONN,
        pointer={"url": airflow.store_url, "aws_conn_id": "ft_sec_store"},
        stored=description(OWN_CONN, aws_conn_id="ft_sec_store"),
    )
    assert web.get(f"/api/runs/{OWN_CONN}/{own}", headers=ada).status_code == 200
    default = airflow.run(
        OWN_CONN,
        pointer={"url": airflow.store_url, "aws_conn_id": "aws_default"},
        stored=description(OWN_CONN),
    )
    refused = web.get(f"/api/runs/{OWN_CONN}/{default}", headers=ada)
    assert refused.status_code == 409 and "connection 'ft_sec_store'" in refused.text


def test_a_huge_parallelism_in_a_stored_description_is_refused_quickly(airflow, web):
    huge = PipelineDescription(
        DAG,
        [
            StageDeclaration("A", 2_000_000, (), (Output("a"),), mapped=True),
            StageDeclaration("B", 1, (Input("a"),), (Output("b"),)),
            StageDeclaration("C", 1, (Input("b"),), (Output("c"),)),
            StageDeclaration("D", 1, (Input("b"),), (Output("d"),)),
        ],
        restart_config=FIXED,
    )
    run_id = airflow.run(stored=huge)
    started = time.monotonic()
    response = web.get(f"/api/runs/{DAG}/{run_id}", headers=bearer(airflow.token("ada")))
    assert response.status_code == 409 and "parallelism 2000000" in response.text
    assert time.monotonic() - started < 5


def test_a_huge_run_time_map_count_in_a_stored_description_is_refused(airflow, web):
    expanded = PipelineDescription(
        DAG,
        [
            StageDeclaration("A", 1, (), (Output("a"),), mapped=True, expands_at_run_time=True),
            StageDeclaration("B", 1, (Input("a"),), (Output("b"),)),
            StageDeclaration("C", 1, (Input("b"),), (Output("c"),)),
            StageDeclaration("D", 1, (Input("b"),), (Output("d"),)),
        ],
        restart_config=FIXED,
        map_counts={"A": 2_000_000},
    )
    run_id = airflow.run(stored=expanded)
    response = web.get(f"/api/runs/{DAG}/{run_id}", headers=bearer(airflow.token("ada")))
    assert response.status_code == 409 and "records 2000000 map indexes of stage 'A'" in response.text


def test_run_ids_the_store_cannot_hold_are_a_clear_4xx(airflow, web):
    airflow.run(run_id=".")  # Airflow accepts '.' as a run id ('..' it refuses itself)
    ada = bearer(airflow.token("ada"))
    for response in (
        web.get(f"/api/runs/{DAG}/%2E", headers=ada),
        web.post(f"/api/runs/{DAG}/%2E/restart", headers=ada, json={"task": "B"}),
    ):
        assert response.status_code == 400, response.text
        assert (
            "cannot be a failover pipeline run" in response.text
            and "must not be '.' or '..'" in response.text
        )
    missing = web.get(f"/api/runs/{DAG}/%2E%2E", headers=ada)
    assert missing.status_code == 404 and "has no run '..'" in missing.text


# -- what is rendered ---------------------------------------------------------------------------------
def embedded_config(html: str) -> str:
    return html.split('id="ft-config">', 1)[1].split("</script>", 1)[0]


def test_hostile_names_are_escaped_in_the_page(airflow, web):
    from airflow_ft_provider.plugins.app import _page

    ada = bearer(airflow.token("ada"))
    page = web.get(f"/runs/{DAG}/{quote(HOSTILE_ID, safe='')}", headers=ada)  # rendered before any lookup
    assert page.status_code == 200
    config = embedded_config(page.text)
    assert "<" not in config and ">" not in config and "&" not in config
    assert json.loads(config) == {"view": "run", "dag_id": DAG, "run_id": HOSTILE_ID}
    assert page.text.count("<script") == 2 and "<svg" not in page.text  # the config and the page's script
    # '</script>' cannot reach the page through a URL (a run id is one path segment); the JSON block
    # would not end there either.
    config = embedded_config(_page({"view": "run", "dag_id": DAG, "run_id": HOSTILE}).body.decode())
    assert json.loads(config)["run_id"] == HOSTILE and "<" not in config


def test_the_pages_may_be_framed_by_this_origin_only(airflow, web):
    run_id = airflow.run()
    ada = bearer(airflow.token("ada"))
    for path in ("/", f"/runs/{DAG}/{run_id}", f"/api/runs/{DAG}/{run_id}", "/api/runs"):
        response = web.get(path, headers=ada)
        assert response.headers["X-Frame-Options"] == "SAMEORIGIN", path
        assert "frame-ancestors 'self'" in response.headers["Content-Security-Policy"], path
        assert response.headers["X-Content-Type-Options"] == "nosniff", path
    page = web.get(f"/runs/{DAG}/{run_id}", headers=ada)
    nonce = page.headers["Content-Security-Policy"].split("'nonce-", 1)[1].split("'", 1)[0]
    assert (
        f'<script nonce="{nonce}">' in page.text
        and "script-src 'nonce-" in page.headers["Content-Security-Policy"]
    )


def test_causes_are_shown_masked_and_as_data(airflow, web):
    from airflow.sdk.log import mask_secret

    secret = "leaked-" + uuid.uuid4().hex
    run_id = airflow.run()
    journal = RecoveryJournal(airflow.store, RunRef(DAG, run_id))
    journal.record(
        event_from_json(
            {
                "time": 1.0,
                "kind": "failover",
                "task": "C",
                "try_number": 1,
                "restart": True,
                "cause": f"RuntimeError: {HOSTILE} token={secret}",
                "regions": [["C"]],
                "tasks": ["C"],
                "cleared": [],
                "delay": 2.0,
                "reason": "restart",
                "strategy": "FixedDelay",
            }
        )
    )
    mask_secret(secret)  # as the API server's masker knows a connection's password once it has read it
    response = web.get(f"/api/runs/{DAG}/{run_id}", headers=bearer(airflow.token("ada")))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    [event] = response.json()["history"]
    assert secret not in response.text and event["cause"] == f"RuntimeError: {HOSTILE} token=***"


# -- a damaged recovery journal -------------------------------------------------------------------------
DAMAGED_STATES = {
    "not-json": b'{"version": 1, "strategies": ',
    "unknown-version": b'{"version": 7}',
    "budget-not-an-object": b'{"version": 1, "strategies": {"run": ["fixed-delay", 3]}}',
    # Passes the state's own schema; only the run's restart strategy can tell (the page used to 500 here
    # while a restart went through).
    "budget-of-the-wrong-type": (
        b'{"version": 1, "strategies": {"run": {"type": "fixed-delay", "failures": "3"}}}'
    ),
    "budget-of-another-strategy": b'{"version": 1, "strategies": {"run": {"type": "failure-rate"}}}',
    "restart-time-not-a-number": b'{"version": 1, "not_before": {"C": "soon"}}',
}


@pytest.mark.parametrize("damage", DAMAGED_STATES, ids=list(DAMAGED_STATES))
def test_a_damaged_recovery_state_is_shown_and_blocks_restarts(airflow, web, damage):
    """The page shows the run with the journal marked damaged and why; a restart is refused with 409
    before anything is cleared or written (it would overwrite the evidence and the restart budgets)."""
    run_id = airflow.run()
    journal = RecoveryJournal(airflow.store, RunRef(DAG, run_id))
    airflow.store.write_object(journal.state_key, DAMAGED_STATES[damage])
    before = airflow.tries(DAG, run_id)
    ada = bearer(airflow.token("ada"))

    page = web.get(f"/api/runs/{DAG}/{run_id}", headers=ada)
    assert page.status_code == 200, page.text
    view = page.json()
    assert view["journal"]["damaged"] is True
    assert f"s3://{airflow.store.bucket}/{journal.state_key} is damaged" in view["journal"]["reason"]
    assert "repaired, or deleted" in view["journal"]["reason"]
    assert {t["id"]: t["state"] for t in view["tasks"]} == {
        "A": "success",
        "B": "success",
        "C": "failed",
        "D": "running",
    }

    refused = restart(web, run_id, headers=ada)
    assert refused.status_code == 409, refused.text
    assert "restart refused, nothing was cleared" in refused.text and "is damaged" in refused.text
    assert airflow.tries(DAG, run_id) == before
    assert stored_events(journal) == []
    assert airflow.store.json_objects.get_bytes(journal.state_key).value == DAMAGED_STATES[damage]


def test_a_sound_journal_is_not_marked_damaged_and_a_deleted_one_restarts(airflow, web):
    run_id = airflow.run()
    journal = RecoveryJournal(airflow.store, RunRef(DAG, run_id))
    ada = bearer(airflow.token("ada"))
    airflow.store.write_object(journal.state_key, DAMAGED_STATES["budget-of-the-wrong-type"])
    assert restart(web, run_id, headers=ada).status_code == 409
    airflow.store.client.delete_object(
        Bucket=airflow.store.bucket, Key=journal.state_key
    )  # the documented fix
    assert web.get(f"/api/runs/{DAG}/{run_id}", headers=ada).json()["journal"] == {
        "damaged": False,
        "reason": "",
    }
    assert restart(web, run_id, headers=ada).json()["cleared"] == ["B", "C", "D"]


# -- the documented JSON routes ------------------------------------------------------------------------
def documented_json_routes() -> str:
    text = (Path(__file__).resolve().parents[3] / "docs" / "monitoring.md").read_text()
    return text.split("* **JSON routes**", 1)[1].split("* **Task links**", 1)[0]


def test_the_json_routes_answer_the_fields_the_docs_document(airflow, web):
    """Each field the routes answer is named in docs/monitoring.md's table (which names no other)."""
    run_id = airflow.run()
    ada = bearer(airflow.token("ada"))
    listing = web.get("/api/runs", headers=ada).json()
    view = web.get(f"/api/runs/{DAG}/{run_id}", headers=ada).json()
    restarted = restart(web, run_id, headers=ada).json()
    fields = {
        *listing,
        *listing["runs"][0],
        *view,
        *restarted,
        *view["strategy"],
        *view["strategy"]["scopes"][0],
        *view["journal"],
    }
    for section in ("stages", "tasks", "edges", "regions", "partitions"):
        fields |= set(view[section][0])
    airflow.store.write_object(
        RecoveryJournal(airflow.store, RunRef(DAG, run_id)).events_prefix + "x.json",
        json.dumps({"time": 2.0, "kind": "manual", "task": "B"}).encode(),
    )
    fields |= set(web.get(f"/api/runs/{DAG}/{run_id}", headers=ada).json()["history"][0])
    documented = set(re.findall(r"`([a-z_]+)`", documented_json_routes()))
    assert {"runs", "journal", "damaged", "restart_not_before", "producer_try", "cleared"} <= fields
    assert documented == fields  # and the table names nothing the routes do not answer
