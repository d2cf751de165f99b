"""The Airflow REST API, used by region failover to restart tasks other than the failing one.

A task cannot clear other task instances through the execution API; it needs the public REST API
(``POST /api/v2/dags/{dag_id}/clearTaskInstances``) with a JWT from ``POST /auth/token``.

Connection ``airflow_api`` (type ``http`` or ``https``): host and port of the API server, login/password of
a user allowed to clear task instances. The scheme is ``https`` for an ``https://`` URI or a ``schema`` of
``https``. Extra (all optional):

* ``verify``: ``true`` (default), ``false``, or the path of a CA bundle (file or directory) to verify the
  server's certificate with;
* ``allow_insecure_http``: ``true`` to send the password over plain ``http`` to a host that is not the
  loopback interface (refused otherwise: anyone on the path could read it).

Every call has a timeout. Only requests whose repetition is harmless are retried: reads, the login, and
requests that never reached the server. A clear is not (a second clear would restart the new try too);
when its answer is lost, :class:`AirflowApiOutcomeUnknown` tells the caller to look before clearing again.
Credentials and tokens are never logged.
"""

from __future__ import annotations

import reprlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeAlias

import httpx
import tenacity
from airflow.sdk import BaseHook

from airflow_ft_provider.hooks.api_errors import (
    AirflowApiError,
    AirflowApiOutcomeUnknown,
    AirflowApiUnreachable,
    RetryableTransportError,
    api_path,
    retryable,
)
from airflow_ft_provider.hooks.api_server import ApiServer, api_server
from airflow_ft_provider.hooks.task_instances import TaskInstanceRow
from airflow_ft_provider.safe_json import is_object_list

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
TOKEN_PATH = "/auth/token"
Primitive: TypeAlias = str | int | float | bool | None
QueryValue: TypeAlias = Primitive | Sequence[Primitive]


@dataclass(frozen=True)
class Body:
    """What a request sends besides its method and path: query parameters, headers and a JSON body."""

    params: Mapping[str, QueryValue] | None = None
    json: object = field(default=None, repr=False)  # the login's carries the password
    headers: Mapping[str, str] = field(default_factory=dict)  # e.g. Accept; the hook adds the token


class AirflowApiHook(BaseHook):
    """Clears and reads task instances of a DAG run through the public REST API.

    :param airflow_api_conn_id: ``http``/``https`` connection to the API server (default ``airflow_api``).
    :param timeout: seconds for connecting, and for each read and write, of every request.

    Use it as a context manager (or call :meth:`close`): it keeps one HTTP connection pool.
    """

    conn_name_attr = "airflow_api_conn_id"
    default_conn_name = "airflow_api"
    conn_type = "http"
    hook_name = "Airflow REST API (region failover)"

    def __init__(
        self,
        airflow_api_conn_id: str = default_conn_name,
        *,
        timeout: float = 30.0,
        server: ApiServer | None = None,
        logger_name: str | None = None,
    ) -> None:
        super().__init__(logger_name=logger_name)
        self.airflow_api_conn_id = airflow_api_conn_id
        self.timeout = timeout
        self._token: str | None = None
        self._from_connection = server is None
        if server is not None:  # given directly (tools and tests): no connection is read
            self.__dict__["server"] = server

    # -- the connection -----------------------------------------------------------------------------
    @cached_property
    def server(self) -> ApiServer:
        from airflow.sdk.exceptions import AirflowNotFoundException

        conn_id = self.airflow_api_conn_id
        try:
            conn = self.get_connection(conn_id)
        except AirflowNotFoundException:
            raise AirflowNotFoundException(
                f"connection {conn_id!r} is not defined; region failover needs it to restart "
                f"tasks through the Airflow REST API: AIRFLOW_CONN_{conn_id.upper()}="
                "'https://<user>:<password>@<api-server host>:<port>'"
            ) from None
        return api_server(conn, conn_id, self.log)

    @cached_property
    def _http(self) -> httpx.Client:
        server = self.server
        if self._from_connection:  # where a task's clears go: worth a line in its log; a tool knows it
            self.log.info("Airflow REST API at %s (connection %r)", server.base_url, self.airflow_api_conn_id)
        return httpx.Client(
            base_url=server.base_url,
            timeout=httpx.Timeout(self.timeout),
            verify=server.verify,
            follow_redirects=False,
        )

    def close(self) -> None:
        if "_http" in self.__dict__:
            self.__dict__.pop("_http").close()

    def __enter__(self) -> AirflowApiHook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests -----------------------------------------------------------------------------------
    def _send(
        self, method: str, path: str, *, idempotent: bool, body: Body, token: str | None = None
    ) -> httpx.Response:
        headers = {**body.headers, **({"Authorization": f"Bearer {token}"} if token else {})}
        try:
            return self._http.request(method, path, params=body.params, json=body.json, headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            raise  # never sent: tenacity may repeat it
        except httpx.TransportError as err:
            if idempotent:
                raise RetryableTransportError(str(err)) from err
            raise AirflowApiOutcomeUnknown(
                f"Airflow REST API {method} {path}: the answer was lost ({type(err).__name__}: {err}); "
                "it may or may not have been applied"
            ) from err

    def _authenticate(self) -> str:
        server = self.server
        # Repeating a login is harmless: it mints another token.
        response = self._send(
            "POST",
            TOKEN_PATH,
            idempotent=True,
            body=Body(json={"username": server.login, "password": server.password}),
        )
        if response.status_code not in (200, 201):
            raise AirflowApiError(
                "POST",
                TOKEN_PATH,
                response.status_code,
                f"login of {server.login!r} refused; check the connection {self.airflow_api_conn_id!r}",
                retryable=response.status_code >= 500,
            )
        self._token = response.json()["access_token"]
        return self._token

    def request(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool | None = None,
        accept: Collection[int] = (),
        params: Mapping[str, QueryValue] | None = None,
        json: object = None,
        headers: Mapping[str, str] | None = None,
    ) -> object:
        """One authenticated call; retried on transport errors and 5xx answers only when ``idempotent``
        (default: by its method), else :class:`AirflowApiOutcomeUnknown` when its answer is lost.

        Returns the parsed JSON answer (text for other content types, None for none); a status of 300
        or more is an :class:`AirflowApiError` unless ``accept`` lists it (e.g. 409 "already exists").
        """
        idempotent = method.upper() in IDEMPOTENT_METHODS if idempotent is None else idempotent
        try:
            return self._request(
                method, path, idempotent=idempotent, accept=accept, body=Body(params, json, headers or {})
            )
        except httpx.TransportError as err:
            cause = err.__cause__ if isinstance(err, RetryableTransportError) and err.__cause__ else err
            raise AirflowApiUnreachable(
                f"Airflow REST API at {self.server.base_url} (connection {self.airflow_api_conn_id!r}) is "
                f"unreachable: {cause}; check host, port and schema of the connection and that the API "
                "server is running"
            ) from err

    @tenacity.retry(
        retry=tenacity.retry_if_exception(retryable),
        wait=tenacity.wait_exponential(multiplier=0.5, max=8),
        stop=tenacity.stop_after_attempt(6),
        reraise=True,
    )
    def _request(
        self, method: str, path: str, *, idempotent: bool, accept: Collection[int], body: Body
    ) -> object:
        for fresh_login in (False, True):  # a 401 is answered before anything is applied: repeat once
            token = self._token if self._token and not fresh_login else self._authenticate()
            response = self._send(
                method,
                path,
                idempotent=idempotent,
                body=body,
                token=token,
            )
            if response.status_code != 401:
                break
        if response.status_code >= 500 and not idempotent:
            raise AirflowApiOutcomeUnknown(
                f"Airflow REST API {method} {path} answered {response.status_code}: "
                f"{response.text[:300]}; it may or may not have been applied"
            )
        if response.status_code >= 300 and response.status_code not in accept:
            raise AirflowApiError(
                method, path, response.status_code, response.text, retryable=response.status_code >= 500
            )
        if not response.content:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    def login(self) -> str:
        """A fresh access token (JWT) for the connection's user."""
        return self._authenticate()

    # -- task instances -----------------------------------------------------------------------------
    def paged(
        self, path: str, key: str, params: Mapping[str, QueryValue] | None = None
    ) -> list[Mapping[str, object]]:
        """Every item of a paginated collection (``key`` names the list in each page)."""
        items: list[Mapping[str, object]] = []
        while True:
            page = self.request("GET", path, params={**(params or {}), "limit": 100, "offset": len(items)})
            if not isinstance(page, Mapping) or not is_object_list(listed := page.get(key)):
                raise AirflowApiError("GET", path, 200, f"not a page of {key}: {reprlib.repr(page)}")
            items.extend(listed)
            total = page.get("total_entries", 0)
            if not listed or len(items) >= (total if isinstance(total, int) else 0):
                return items

    def task_instances(self, dag_id: str, run_id: str) -> list[Mapping[str, object]]:
        """All task instances of a run, one entry per map index (``TaskInstanceResponse``: ``task_id``,
        ``map_index``, ``state``, ``try_number``, ``id``, ...)."""
        return self.paged(api_path("dags", dag_id, "dagRuns", run_id, "taskInstances"), "task_instances")

    def clear(
        self, dag_id: str, run_id: str, task_instances: Iterable[tuple[str, int]]
    ) -> list[Mapping[str, object]]:
        """Clear exactly these (task id, map index) instances of one run, whatever their state.

        Sent once: raises :class:`AirflowApiOutcomeUnknown` when the answer is lost. Every instance a
        clear touches gets a new ``id``, which is how a caller learns afterwards whether it happened.
        """
        body = {
            "dag_run_id": run_id,
            "task_ids": [
                [task_id, map_index] if map_index >= 0 else task_id for task_id, map_index in task_instances
            ],
            "dry_run": False,  # the endpoint's defaults are dry_run=true and only_failed=true
            "only_failed": False,
            "include_downstream": False,
            "include_upstream": False,
            "reset_dag_runs": True,
        }
        path = api_path("dags", dag_id, "clearTaskInstances")
        answer = self.request("POST", path, json=body)
        cleared = answer.get("task_instances") if isinstance(answer, Mapping) else None
        if not is_object_list(cleared):
            raise AirflowApiOutcomeUnknown(
                f"Airflow REST API POST {path} answered without a list of task instances "
                f"({reprlib.repr(answer)}); the clear may or may not have been applied"
            )
        return cleared

    def instances(self, dag_id: str, run_id: str) -> list[TaskInstanceRow]:
        """The ``TaskInstanceApi`` of region failover (hooks/task_instances.py): typed rows."""
        return [TaskInstanceRow.from_api(item) for item in self.task_instances(dag_id, run_id)]

    def clear_instances(
        self, dag_id: str, run_id: str, keys: Sequence[tuple[str, int]]
    ) -> list[TaskInstanceRow]:
        return [TaskInstanceRow.from_api(item) for item in self.clear(dag_id, run_id, keys)]

    def try_state(
        self, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int
    ) -> str | None:
        one_try = ("taskInstances", task_id, *((map_index,) if map_index >= 0 else ()), "tries", try_number)
        try:
            answer = self.request("GET", api_path("dags", dag_id, "dagRuns", run_id, *one_try))
        except AirflowApiError as err:
            if err.status == 404:  # a try its worker could not start: Airflow failed it without a record
                return None
            raise
        state = answer.get("state") if isinstance(answer, Mapping) else None
        return state if isinstance(state, str) else None
