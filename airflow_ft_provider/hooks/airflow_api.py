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

import os
import ssl
from collections.abc import Collection, Iterable, Sequence
from functools import cached_property
from typing import Any

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
from airflow_ft_provider.hooks.api_server import ApiServer, is_loopback, parse_flag
from airflow_ft_provider.hooks.task_instances import TaskInstanceRow

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
TOKEN_PATH = "/auth/token"


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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
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
        if not conn.host or not conn.login:
            raise ValueError(
                f"connection {conn_id!r} needs host and login/password of the Airflow API "
                "server (e.g. AIRFLOW_CONN_AIRFLOW_API='http://admin:secret@localhost:8080'); region "
                "failover uses it to restart tasks of the failed region's neighbours"
            )
        extra = conn.extra_dejson or {}
        if "://" in conn.host:  # host given as a whole URL
            url = httpx.URL(conn.host)
            scheme, host, port, path = url.scheme, url.host, conn.port or url.port, url.path
        else:
            schema = (conn.schema or "").strip("/")
            if schema.lower() in ("http", "https"):
                scheme, path = schema.lower(), ""
            else:  # an https:// URI gives conn_type "https"; a URI's path arrives as the schema
                scheme, path = ("https" if conn.conn_type == "https" else "http"), schema
            host, port = conn.host, conn.port
        if scheme not in ("http", "https"):
            raise ValueError(f"connection {conn_id!r}: scheme {scheme!r} is not http or https")
        allow_http = parse_flag(
            extra.get("allow_insecure_http", False), what=f"connection {conn_id!r} extra allow_insecure_http"
        )
        if scheme == "http" and not is_loopback(host) and not allow_http:
            raise ValueError(
                f"connection {conn_id!r} would send the password of {conn.login!r} in clear text over "
                f"http to {host!r}, which is not a loopback address; use https "
                f"(e.g. AIRFLOW_CONN_{conn_id.upper()}="
                f"'https://<user>:<password>@{host}:<port>') or, on a private network you trust, set the "
                "extra "
                '{"allow_insecure_http": true}'
            )
        netloc = f"[{host}]" if ":" in host and not host.startswith("[") else host
        base = f"{scheme}://{netloc}{f':{port}' if port else ''}/{path.strip('/')}".rstrip("/")
        return ApiServer(base, conn.login, conn.password or "", self._verify(extra.get("verify", True)))

    def _verify(self, value: object) -> bool | ssl.SSLContext:
        """``verify`` of the extra: on (default), off, or a CA bundle (file or directory)."""
        flag = parse_flag(value, what="")
        if flag is True:
            return True
        if flag is False:
            self.log.warning(
                "TLS certificate verification is off for connection %r: anyone on the network "
                "path can impersonate the API server",
                self.airflow_api_conn_id,
            )
            return False
        path = os.path.expanduser(str(value))
        if not os.path.exists(path):
            raise ValueError(
                f"connection {self.airflow_api_conn_id!r}: extra verify={value!r} is neither true/false "
                "nor an existing CA bundle (file or directory); give the path of the PEM file that signed "
                "the API server's certificate"
            )
        if os.path.isdir(path):
            return ssl.create_default_context(capath=path)
        return ssl.create_default_context(cafile=path)

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
    def _send(self, method: str, path: str, *, idempotent: bool, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
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
            "POST", TOKEN_PATH, idempotent=True, json={"username": server.login, "password": server.password}
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
        **kwargs: Any,
    ) -> Any:
        """One authenticated call; retried on transport errors and 5xx answers only when ``idempotent``
        (default: by its method), else :class:`AirflowApiOutcomeUnknown` when its answer is lost.

        Returns the parsed JSON answer (text for other content types, None for none); a status of 300
        or more is an :class:`AirflowApiError` unless ``accept`` lists it (e.g. 409 "already exists").
        """
        idempotent = method.upper() in IDEMPOTENT_METHODS if idempotent is None else idempotent
        try:
            return self._request(method, path, idempotent=idempotent, accept=accept, **kwargs)
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
        self, method: str, path: str, *, idempotent: bool, accept: Collection[int], **kwargs: Any
    ) -> Any:
        headers = kwargs.pop("headers", {})
        for fresh_login in (False, True):  # a 401 is answered before anything is applied: repeat once
            token = self._token if self._token and not fresh_login else self._authenticate()
            response = self._send(
                method,
                path,
                idempotent=idempotent,
                headers={**headers, "Authorization": f"Bearer {token}"},
                **kwargs,
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
    def paged(self, path: str, key: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every item of a paginated collection (``key`` names the list in each page)."""
        items: list[dict[str, Any]] = []
        while True:
            page = self.request("GET", path, params={**(params or {}), "limit": 100, "offset": len(items)})
            items.extend(page[key])
            if not page[key] or len(items) >= page.get("total_entries", 0):
                return items

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """All task instances of a run, one entry per map index (``TaskInstanceResponse``: ``task_id``,
        ``map_index``, ``state``, ``try_number``, ``id``, ...)."""
        return self.paged(api_path("dags", dag_id, "dagRuns", run_id, "taskInstances"), "task_instances")

    def clear(
        self, dag_id: str, run_id: str, task_instances: Iterable[tuple[str, int]]
    ) -> list[dict[str, Any]]:
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
        answer = self.request("POST", api_path("dags", dag_id, "clearTaskInstances"), json=body)
        return answer["task_instances"]

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
            state = self.request("GET", api_path("dags", dag_id, "dagRuns", run_id, *one_try)).get("state")
        except AirflowApiError as err:
            if err.status == 404:  # a try its worker could not start: Airflow failed it without a record
                return None
            raise
        return state if isinstance(state, str) else None
