"""A background poller of a run's task-instance states, for the short-lived ones (DEFERRED, UP_FOR_RETRY,
RESTARTING) that can be over before a test gets to look."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from ft_harness.airflow.airflow_rest import FINISHED_TI_STATES, AirflowRestClient


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class TaskStateRecorder:
    """Background poller that records every (state, try_number) change of the watched runs' TIs.

    Short-lived states (DEFERRED, UP_FOR_RETRY, RESTARTING, ...) can be over before a test gets to look;
    the recorder keeps their history. Resolution is ``interval`` seconds::

        rec = TaskStateRecorder(live_airflow.new_client, interval=0.5)
        rec.watch(dag_id, run_id)
        ...
        rec.states(dag_id, run_id, "my_task")   # e.g. ['queued', 'running', 'deferred', ...]
        rec.stop()
    """

    def __init__(self, client_factory: Callable[[], AirflowRestClient], *, interval: float = 1.0):
        self._client = client_factory()
        self.interval = interval
        self._runs: list[tuple[str, str]] = []
        self._quiet_until: dict[tuple[str, str], float] = {}  # finished runs are polled every 5 s
        self._hist: dict[tuple[str, str, str, int], list[tuple[float, str | None, int]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._loop, name="ti-state-recorder", daemon=True)
        self._thread.start()

    def watch(self, dag_id: str, run_id: str) -> None:
        with self._lock:
            if (dag_id, run_id) not in self._runs:
                self._runs.append((dag_id, run_id))
        self.poll_once(dag_id, run_id)

    def poll_once(self, dag_id: str, run_id: str) -> None:
        try:
            tis = self._client.task_instances(dag_id, run_id)
        except Exception as e:  # noqa: BLE001  (keep polling; surfaced in .errors)
            self.errors.append(repr(e))
            return
        now = time.time()
        if tis and all(ti["state"] in FINISHED_TI_STATES for ti in tis):
            self._quiet_until[(dag_id, run_id)] = time.monotonic() + 5
        else:
            self._quiet_until.pop((dag_id, run_id), None)
        with self._lock:
            for ti in tis:
                key = (dag_id, run_id, ti["task_id"], ti.get("map_index", -1))
                hist = self._hist.setdefault(key, [])
                entry = (now, ti["state"], ti["try_number"])
                if not hist or hist[-1][1:] != entry[1:]:
                    hist.append(entry)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                runs = list(self._runs)
            for dag_id, run_id in runs:
                if self._quiet_until.get((dag_id, run_id), 0) <= time.monotonic():
                    self.poll_once(dag_id, run_id)

    def history(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1
    ) -> list[tuple[float, str | None, int]]:
        """``[(unix_time_first_seen, state, try_number), ...]`` in order of observation."""
        with self._lock:
            return list(self._hist.get((dag_id, run_id, task_id, map_index), []))

    def states(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> list[str | None]:
        return [s for _, s, _ in self.history(dag_id, run_id, task_id, map_index)]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._client.close()
