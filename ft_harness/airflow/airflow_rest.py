"""The REST client of tests, the demo and benchmarks: the provider's own ``AirflowApiHook`` (its
authentication, retries of idempotent calls, and no blind repeat of a clear) plus the calls tests need.

It deliberately has no pytest dependency so that test DAGs can import it from inside a running task
(the live-Airflow fixture puts the repository root on the components' ``PYTHONPATH``)::

    from ft_harness.airflow.airflow_rest import AirflowRestClient

    client = AirflowRestClient.from_connection("airflow_api")   # inside a task
    client.clear_task_instances(dag_id, run_id, [("mapped", 1)])

Authentication: ``POST /auth/token`` with ``{"username", "password"}`` returns a JWT (SimpleAuthManager;
HTTP 201). The token is sent as ``Authorization: Bearer ...`` and refreshed once on a 401 (the hook's).

Note the defaults of :meth:`AirflowRestClient.clear_task_instances`: the REST endpoint defaults
``dry_run`` *and* ``only_failed`` to **true**; this client sends ``dry_run=False`` and
``only_failed=False`` unless told otherwise, because that is what "clear this task" means in the tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from airflow_ft_provider.hooks.airflow_api import (
    AirflowApiError,
    AirflowApiHook,
    AirflowApiOutcomeUnknown,
    ApiServer,
)

TERMINAL_DAG_RUN_STATES = frozenset({"success", "failed"})
FINISHED_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})

TaskMarker = str | tuple[str, int] | list[Any]


class AirflowWaitTimeout(TimeoutError):
    """A wait on a DAG run / task instance did not finish in time."""


def parse_ts(value: str | None) -> datetime | None:
    """Parse an ISO timestamp from the API (always timezone-aware, UTC)."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def format_task_instances(tis: Iterable[dict[str, Any]]) -> str:
    """A compact table of task instances: task_id[map_index] state try=N start end."""
    lines = []
    for ti in sorted(tis, key=lambda t: (t["task_id"], t.get("map_index", -1))):
        mi = ti.get("map_index", -1)
        name = ti["task_id"] + (f"[{mi}]" if mi is not None and mi >= 0 else "")
        lines.append(
            f"  {name:40} state={ti.get('state')!s:16} try={ti.get('try_number')} "
            f"max_tries={ti.get('max_tries')} start={ti.get('start_date')} end={ti.get('end_date')}"
        )
    return "\n".join(lines) or "  (no task instances)"


def try_numbers(tis: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Try number per task, keyed as the failover core names tasks: ``task`` or ``task[map_index]``."""
    return {
        ti["task_id"] + (f"[{ti['map_index']}]" if ti.get("map_index", -1) >= 0 else ""): ti["try_number"]
        for ti in tis
    }


class AirflowRestClient(AirflowApiHook):
    """Synchronous client for the subset of ``/api/v2`` the tests, the demo and the benchmarks need."""

    def __init__(
        self, base_url: str, username: str, password: str, *, timeout: float = 30.0, verify: Any = True
    ) -> None:
        server = ApiServer(base_url.rstrip("/"), username, password, verify)
        super().__init__(f"(given: {base_url})", timeout=timeout, server=server)
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password

    @classmethod
    def from_connection(cls, conn_id: str = "airflow_api", **kwargs: Any) -> AirflowRestClient:
        """A client of the server an Airflow connection names (inside a running task too)."""
        server = AirflowApiHook(conn_id).server
        return cls(server.base_url, server.login, server.password, verify=server.verify, **kwargs)

    def get_token(self) -> str:
        """``POST /auth/token`` -> JWT access token."""
        return self.login()

    def request(self, method: str, path: str, *, expect: Sequence[int] = (200,), **kwargs: Any) -> Any:
        """Authenticated request (the hook's); ``expect``: the statuses that are answers, not errors."""
        return super().request(method, path, accept=[status for status in expect if status >= 300], **kwargs)

    # -- health / DAGs ------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``GET /api/v2/monitor/health`` (no auth needed)."""
        resp = self._http.get("/api/v2/monitor/health")
        if resp.status_code != 200:
            raise AirflowApiError("GET", "/api/v2/monitor/health", resp.status_code, resp.text)
        return resp.json()

    def list_dags(self) -> list[dict[str, Any]]:
        return self.paged("/api/v2/dags", "dags")

    def get_dag(self, dag_id: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v2/dags/{dag_id}")

    def set_paused(self, dag_id: str, paused: bool) -> dict[str, Any]:
        return self.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": paused}, idempotent=True)

    def import_errors(self) -> list[dict[str, Any]]:
        return self.paged("/api/v2/importErrors", "import_errors")

    # -- DAG runs -----------------------------------------------------------------------------------

    def trigger_dag_run(
        self,
        dag_id: str,
        conf: dict[str, Any] | None = None,
        *,
        run_id: str | None = None,
        logical_date: datetime | None = None,
        note: str | None = None,
    ) -> dict[str, Any]:
        """``POST /api/v2/dags/{dag_id}/dagRuns``; returns the created run (``dag_run_id`` etc.)."""
        body: dict[str, Any] = {
            "logical_date": logical_date.isoformat() if logical_date else None,
            "conf": conf or {},
        }
        if run_id:
            body["dag_run_id"] = run_id
        if note:
            body["note"] = note
        try:
            return self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body)
        except AirflowApiOutcomeUnknown:
            if not run_id:
                raise
            # The answer was lost: the run exists if the trigger reached the server; else trigger again.
            try:
                return self.get_dag_run(dag_id, run_id)
            except AirflowApiError as err:
                if err.status != 404:
                    raise
            return self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body)

    def get_dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")

    def wait_for_dag_run(
        self,
        dag_id: str,
        run_id: str,
        *,
        timeout: float = 180.0,
        states: Iterable[str] = TERMINAL_DAG_RUN_STATES,
        poll: float = 1.0,
    ) -> dict[str, Any]:
        """Poll until the run is in one of ``states`` (default: success/failed).

        On timeout raises :class:`AirflowWaitTimeout` with the run state and a task-instance table.
        """
        wanted = set(states)
        deadline = time.monotonic() + timeout
        while True:
            run = self.get_dag_run(dag_id, run_id)
            if run["state"] in wanted:
                return run
            if time.monotonic() > deadline:
                tis = self.task_instances(dag_id, run_id)
                raise AirflowWaitTimeout(
                    f"DAG run {dag_id}/{run_id} still {run['state']!r} after {timeout:.0f}s "
                    f"(wanted {sorted(wanted)}). Task instances:\n{format_task_instances(tis)}"
                )
            time.sleep(poll)

    # -- task instances -----------------------------------------------------------------------------

    def task_instance(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"
        if map_index >= 0:
            path += f"/{map_index}"
        return self.request("GET", path)

    def task_instance_tries(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1
    ) -> list[dict[str, Any]]:
        """All tries of a task instance (history + current), oldest first."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"
        path += f"/{map_index}/tries" if map_index >= 0 else "/tries"
        tries = self.paged(path, "task_instances")
        return sorted(tries, key=lambda t: t["try_number"])

    def wait_for_task_instance(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        *,
        map_index: int = -1,
        states: Iterable[str | None] | None = None,
        predicate: Callable[[dict[str, Any]], bool] | None = None,
        timeout: float = 120.0,
        poll: float = 0.5,
    ) -> dict[str, Any]:
        """Poll one task instance until its state is in ``states`` and/or ``predicate(ti)`` holds."""
        wanted = set(states) if states is not None else None
        deadline = time.monotonic() + timeout
        seen: list[tuple[str | None, int]] = []
        while True:
            try:
                ti = self.task_instance(dag_id, run_id, task_id, map_index)
            except AirflowApiError as e:  # not created yet (mapped tasks expand late)
                if e.status != 404:
                    raise
                ti = None
            if ti is not None:
                if not seen or seen[-1] != (ti["state"], ti["try_number"]):
                    seen.append((ti["state"], ti["try_number"]))
                if (wanted is None or ti["state"] in wanted) and (predicate is None or predicate(ti)):
                    return ti
            if time.monotonic() > deadline:
                raise AirflowWaitTimeout(
                    f"Task instance {dag_id}/{run_id}/{task_id}[{map_index}] did not reach "
                    f"states={sorted(map(str, wanted)) if wanted else None} within {timeout:.0f}s; "
                    f"(state, try) seen: {seen}. Task instances:\n"
                    f"{format_task_instances(self.task_instances(dag_id, run_id))}"
                )
            time.sleep(poll)

    def clear_task_instances(
        self,
        dag_id: str,
        run_id: str,
        task_ids: Sequence[TaskMarker],
        *,
        dry_run: bool = False,
        only_failed: bool = False,
        include_downstream: bool = False,
        include_upstream: bool = False,
        reset_dag_runs: bool = True,
        **extra: Any,
    ) -> list[dict[str, Any]]:
        """``POST /api/v2/dags/{dag_id}/clearTaskInstances`` for one run.

        ``task_ids`` items are ``"task_id"`` (all map indices of a mapped task) or
        ``("task_id", map_index)``. Unlike the endpoint (``dry_run=true, only_failed=true``), this
        method really clears, whatever the state, unless told otherwise. Returns the (to be) cleared
        task instances.
        """
        body = {
            "dag_run_id": run_id,
            "task_ids": [list(t) if isinstance(t, (tuple, list)) else t for t in task_ids],
            "dry_run": dry_run,
            "only_failed": only_failed,
            "include_downstream": include_downstream,
            "include_upstream": include_upstream,
            "reset_dag_runs": reset_dag_runs,
            **extra,
        }
        resp = self.request("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances", json=body)
        return resp["task_instances"]

    def task_log(
        self, dag_id: str, run_id: str, task_id: str, try_number: int, *, map_index: int = -1
    ) -> str:
        """The log of one try as plain text (``event`` lines of the structured log)."""
        data = self.request(
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            params={"map_index": map_index, "full_content": True},
            headers={"Accept": "application/json"},
        )
        content = data.get("content", [])
        if isinstance(content, str):
            return content
        lines = []
        for entry in content:
            if isinstance(entry, dict):
                skip = ("event", "timestamp", "level", "logger")
                extras = {k: v for k, v in entry.items() if k not in skip}
                lines.append(f"{entry.get('level', '')} {entry.get('event', '')} {extras if extras else ''}")
            else:
                lines.append(str(entry))
        return "\n".join(lines)

    def event_logs(
        self, dag_id: str, *, run_id: str | None = None, task_id: str | None = None, event: str | None = None
    ) -> list[dict[str, Any]]:
        """Audit/event log entries (``GET /api/v2/eventLogs``), e.g. ``event="heartbeat timeout"``,
        ``"state mismatch"`` (scheduler found a TI RUNNING although the executor finished it)."""
        params = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "event": event}
        return self.paged("/api/v2/eventLogs", "event_logs", {k: v for k, v in params.items() if v})

    # -- per-task-instance state ------------------------------------------------------------------

    def task_state_store(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
        """``GET .../taskInstances/{task_id}/state-store`` -> ``{key: value}``."""
        data = self.request(
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/state-store",
            params={"map_index": map_index},
        )
        return {e["key"]: e["value"] for e in data["task_state_store"]}

    def xcom_entries(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
        """XCom keys of a task instance -> values (``deserialize=true``)."""
        entries = self.paged(
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries",
            "xcom_entries",
            params={"map_index": map_index},
        )
        out = {}
        for e in entries:
            out[e["key"]] = self.request(
                "GET",
                f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{e['key']}",
                params={"map_index": map_index, "deserialize": True},
            )["value"]
        return out
