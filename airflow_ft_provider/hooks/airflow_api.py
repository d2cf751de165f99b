"""The Airflow REST API, used by region failover to restart tasks other than the failing one.

A task cannot clear other task instances through the execution API; it needs the public REST API
(``POST /api/v2/dags/{dag_id}/clearTaskInstances``) with a JWT from ``POST /auth/token``.

Connection ``airflow_api`` (type ``http``): host, port and schema (http/https) of the API server,
login/password of a user allowed to clear task instances. Credentials and tokens are never logged.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any

import httpx
import tenacity
from airflow.sdk import BaseHook


class AirflowApiError(RuntimeError):
    """The REST API refused or failed a request; the message has the method, path and status."""

    def __init__(self, method: str, path: str, status: int, detail: str) -> None:
        super().__init__(f"Airflow REST API {method} {path} answered {status}: {detail[:500]}")
        self.status = status


class AirflowApiUnreachable(ConnectionError):
    """The API server of the ``airflow_api`` connection did not answer (after retries)."""


def _transient(exc: BaseException) -> bool:
    # SQLite-backed API servers answer 500 "database is locked" under load; nothing was applied then.
    return isinstance(exc, httpx.TransportError) or (isinstance(exc, AirflowApiError) and exc.status >= 500)


class AirflowApiHook(BaseHook):
    """Clears and reads task instances of a DAG run through the public REST API.

    :param airflow_api_conn_id: ``http`` connection to the API server (default ``airflow_api``).
    """

    conn_name_attr = "airflow_api_conn_id"
    default_conn_name = "airflow_api"
    conn_type = "http"
    hook_name = "Airflow REST API (region failover)"

    def __init__(self, airflow_api_conn_id: str = default_conn_name, *, timeout: float = 30.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.airflow_api_conn_id = airflow_api_conn_id
        self.timeout = timeout
        self._token: str | None = None

    @cached_property
    def _settings(self) -> tuple[str, str, str]:
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            conn = self.get_connection(self.airflow_api_conn_id)
        except AirflowNotFoundException:
            raise AirflowNotFoundException(
                f"connection {self.airflow_api_conn_id!r} is not defined; region failover needs it to restart "
                f"tasks through the Airflow REST API: AIRFLOW_CONN_{self.airflow_api_conn_id.upper()}="
                "'http://<user>:<password>@<api-server host>:<port>'"
            ) from None
        if not conn.host or not conn.login:
            raise ValueError(
                f"connection {self.airflow_api_conn_id!r} needs host and login/password of the Airflow API "
                "server (e.g. AIRFLOW_CONN_AIRFLOW_API='http://admin:secret@localhost:8080'); region "
                "failover uses it to restart tasks of the failed region's neighbours"
            )
        host = conn.host if "://" in conn.host else f"{conn.schema or 'http'}://{conn.host}"
        base = f"{host}:{conn.port}" if conn.port else host
        return base.rstrip("/"), conn.login, conn.password or ""

    @cached_property
    def _http(self) -> httpx.Client:
        base, _, _ = self._settings
        self.log.info("Airflow REST API at %s (connection %r)", base, self.airflow_api_conn_id)
        return httpx.Client(base_url=base, timeout=self.timeout)

    def _authenticate(self) -> str:
        _, user, password = self._settings
        response = self._http.post("/auth/token", json={"username": user, "password": password})
        if response.status_code not in (200, 201):
            raise AirflowApiError("POST", "/auth/token", response.status_code,
                                  f"login of {user!r} refused; check the connection {self.airflow_api_conn_id!r}")
        self._token = response.json()["access_token"]
        return self._token

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return self._request(method, path, **kwargs)
        except httpx.TransportError as err:
            base, _, _ = self._settings
            raise AirflowApiUnreachable(
                f"Airflow REST API at {base} (connection {self.airflow_api_conn_id!r}) is unreachable: {err}; "
                "check host, port and schema of the connection and that the API server is running"
            ) from err

    @tenacity.retry(
        retry=tenacity.retry_if_exception(_transient),
        wait=tenacity.wait_exponential(multiplier=0.5, max=8),
        stop=tenacity.stop_after_attempt(6),
        reraise=True,
    )
    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        for fresh_login in (False, True):
            token = self._token if self._token and not fresh_login else self._authenticate()
            response = self._http.request(method, path, headers={"Authorization": f"Bearer {token}"}, **kwargs)
            if response.status_code != 401:
                break
        if response.status_code >= 300:
            raise AirflowApiError(method, path, response.status_code, response.text)
        return response.json()

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        instances: list[dict[str, Any]] = []
        while True:
            page = self.request(
                "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
                params={"limit": 100, "offset": len(instances)},
            )
            instances.extend(page["task_instances"])
            if not page["task_instances"] or len(instances) >= page.get("total_entries", 0):
                return instances

    def task_instance_try(self, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int) -> dict:
        index = f"/{map_index}" if map_index >= 0 else ""
        return self.request(
            "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}{index}/tries/{try_number}"
        )

    def clear(self, dag_id: str, run_id: str, task_instances: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
        """Clear exactly these (task id, map index) instances of one run, whatever their state."""
        body = {
            "dag_run_id": run_id,
            "task_ids": [[task_id, map_index] if map_index >= 0 else task_id for task_id, map_index in task_instances],
            "dry_run": False,  # the endpoint's defaults are dry_run=true and only_failed=true
            "only_failed": False,
            "include_downstream": False,
            "include_upstream": False,
            "reset_dag_runs": True,
        }
        return self.request("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances", json=body)["task_instances"]
