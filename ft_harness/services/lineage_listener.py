"""A real OpenLineage endpoint for tests: an HTTP server that keeps every event POSTed to it.

The session's live Airflow emits its OpenLineage events here through the ``openlineage`` provider's
HTTP transport (``[openlineage] transport``); ``events(dag_id)`` returns what arrived so far.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

ENDPOINT = "api/v1/lineage"
NAMESPACE = "ft-e2e"


class LineageListener:
    def __init__(self) -> None:
        received: list[dict[str, Any]] = []
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    event = json.loads(body)
                except ValueError:
                    self.send_response(400)
                else:
                    with lock:
                        received.append(event)
                    self.send_response(200 if self.path == f"/{ENDPOINT}" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._received, self._lock = received, lock
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="lineage-listener", daemon=True
        )
        self._thread.start()

    def environment(self) -> dict[str, str]:
        """What Airflow's components need to send their events here, and to hand a spark-submit stage's
        application its parent job (as the Spark provider does)."""
        transport = {"type": "http", "url": self.url, "endpoint": ENDPOINT}
        return {
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": NAMESPACE,
            "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "True",
        }

    def events(self, dag_id: str | None = None) -> list[dict[str, Any]]:
        """The events received so far (of ``dag_id``'s tasks and runs only, when given)."""
        with self._lock:
            events = list(self._received)
        if dag_id is None:
            return events
        return [e for e in events if e.get("job", {}).get("name", "").split(".")[0] == dag_id]

    def wait_for(
        self, dag_id: str, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """``dag_id``'s events once ``done`` says they are all there (they trail the task states)."""
        deadline = time.monotonic() + timeout
        while not done(events := self.events(dag_id)) and time.monotonic() < deadline:
            time.sleep(0.5)
        return events

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def lineage_listener():
    listener = LineageListener()
    yield listener
    listener.close()
