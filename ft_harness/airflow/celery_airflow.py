"""A running Airflow 3.3 with CeleryExecutor and several Celery workers, each standing in for a machine.

:class:`CeleryAirflow` is :class:`~ft_harness.airflow.live_airflow.LiveAirflow` (API server, scheduler, DAG
processor, triggerer, metadata on the database given -- PostgreSQL for Celery) plus, per worker:

* ``airflow celery worker`` with its own Celery hostname (``worker-1@…``), its own temporary directory
  and task-log folder, and its own *address*: ``127.0.0.N`` (Linux routes all of 127/8 to loopback).
  Airflow records that address as the task instance's hostname (``[core] hostname_callable`` is
  :func:`worker_address`), so the tests can tell which worker ran a try, as on separate machines;
* that worker's log server (Airflow's own log-serving app) on the address and the common
  ``[logging] worker_log_server_port``, as every machine of a deployment serves its task logs: the
  API server fetches a try's log from the worker that ran it.

The broker is Redis (:mod:`ft_harness.services.redis`); Celery's results go to the metadata database (the
provider's default: ``db+`` and the ``sql_alchemy_conn``). ``kill_worker`` SIGKILLs a worker with
everything it started (pool processes, task supervisors and task processes): a lost machine, as far as
Airflow can tell.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ft_harness.airflow.live_airflow import LiveAirflow, LiveAirflowError, free_port

WORKER_ADDRESS_ENV = "FT_WORKER_ADDRESS"
_LOG_SERVER = """
import os, uvicorn
from airflow.utils.serve_logs.log_server import get_app
uvicorn.run(get_app(), host=os.environ["FT_WORKER_ADDRESS"],
            port=int(os.environ["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"]), log_level="warning")
"""


def worker_address() -> str:
    """``[core] hostname_callable`` of the workers: the address of the worker this process belongs to."""
    return os.environ.get(WORKER_ADDRESS_ENV) or "127.0.0.1"


@dataclass(frozen=True)
class CeleryWorker:
    name: str  # the component name, "worker-1"
    address: str  # 127.0.0.N: the hostname Airflow records for its tries
    folder: Path  # its own temporary directory and task logs

    @property
    def celery_hostname(self) -> str:
        return f"{self.name}@{self.address}"


class CeleryAirflow(LiveAirflow):
    """``CeleryAirflow(dags, broker_url=redis.url(), database_url=postgres.create_database("x"))``.

    :param workers: how many Celery workers (machines) to start.
    :param concurrency: task slots per worker (``--concurrency``).
    :param schedulers: how many schedulers (Airflow's HA mode on PostgreSQL: each one locks the rows it
        schedules with ``SELECT … FOR UPDATE SKIP LOCKED``); the second is the component ``scheduler-2``.
    """

    def __init__(
        self,
        dags: Iterable[str | os.PathLike[str]] = (),
        *,
        broker_url: str,
        workers: int = 2,
        concurrency: int = 4,
        schedulers: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(dags, **kwargs)
        self.schedulers = ["scheduler", *(f"scheduler-{n}" for n in range(2, schedulers + 1))]
        if self.database_url.startswith("sqlite"):
            raise LiveAirflowError("CeleryExecutor needs a database server (PostgreSQL), not SQLite")
        self.broker_url = broker_url
        self.concurrency = concurrency
        self.log_server_port = free_port()
        self._log_offsets: dict[str, int] = {}
        self.workers = [
            CeleryWorker(f"worker-{n}", f"127.0.0.{n + 1}", self.home / f"worker-{n}")
            for n in range(1, workers + 1)
        ]

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env.update(
            {
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__CELERY__BROKER_URL": self.broker_url,
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.concurrency),
                # One task reserved per free slot: a worker must not hold tasks another one could run now.
                "AIRFLOW__CELERY__WORKER_PREFETCH_MULTIPLIER": "1",
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.log_server_port),
                # A task a lost worker had taken is not handed to another one by the broker (after this long):
                # Airflow's heartbeat timeout finds it, and region failover restarts it as a new try.
                "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": "86400",
                # A scheduler that died (its job row still "running") is declared dead after this long;
                # only then does another one adopt its running tries and fail those without a heartbeat.
                # 60 s, not LiveAirflow's 300 s: Celery starts tasks in the workers, so a burst of task
                # starts cannot stall a scheduler's loop (Airflow's default is 30 s).
                "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "60",
                **self.extra_env,
            }
        )
        return env

    def worker_environment(self, worker: CeleryWorker) -> dict[str, str]:
        """What differs between the workers (machines): address, temporary directory, task logs."""
        tmp, logs = worker.folder / "tmp", worker.folder / "logs"
        for folder in (tmp, logs):
            folder.mkdir(parents=True, exist_ok=True)
        return {
            WORKER_ADDRESS_ENV: worker.address,
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"{__name__}.worker_address",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(logs),
            "TMPDIR": str(tmp),
        }

    def _start_workers(self) -> None:
        for name in self.schedulers[1:]:  # the first was started with the other components
            self._spawn(name, self.airflow_command("scheduler"))
        for worker in self.workers:
            self._spawn(
                f"{worker.name}-log-server",
                [sys.executable, "-c", _LOG_SERVER],
                self.worker_environment(worker),
            )
            self.start_worker(worker, wait=False)

    def start_worker(
        self,
        worker: CeleryWorker,
        *,
        wait: bool = True,
        timeout: float = 120.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Start a worker (again, after ``kill_worker``: same name and address); ``env``: settings of
        this worker process beyond the deployment's (e.g. an ``AIRFLOW__FT_PROVIDER__…`` key)."""
        log = self.log_dir / f"{worker.name}.log"
        self._log_offsets[worker.name] = log.stat().st_size if log.exists() else 0
        self._spawn(
            worker.name,
            self.airflow_command(
                "celery",
                "worker",
                "--celery-hostname",
                worker.celery_hostname,
                "--concurrency",
                str(self.concurrency),
                "--skip-serve-logs",
                "--without-gossip",
                "--without-mingle",
            ),
            {**self.worker_environment(worker), **(env or {})},
        )
        if wait:
            self.wait_for_worker(worker, deadline=time.monotonic() + timeout)

    def _wait_until_healthy(self, t0: float) -> None:
        super()._wait_until_healthy(t0)
        for worker in self.workers:
            self.wait_for_worker(worker, deadline=t0 + self.startup_timeout)
        self.timings["workers_ready"] = time.monotonic() - t0

    def wait_for_worker(self, worker: CeleryWorker, *, deadline: float) -> None:
        """Until the worker's log says Celery is consuming (``… ready.``)."""
        log = self.logs[worker.name]
        while (
            f"{worker.celery_hostname} ready."
            not in log.read_text(errors="replace")[self._log_offsets[worker.name] :]
        ):
            self._check_alive()
            if time.monotonic() > deadline:
                raise LiveAirflowError(f"Celery worker {worker.celery_hostname} not ready; see {log}")
            time.sleep(0.5)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        """A try's log from every machine that wrote a part of it, oldest part first.

        A try that defers starts on one worker, waits in the triggerer and may resume on the other.
        Without remote logging each machine keeps its part, and Airflow's log view of a finished try
        shows one of them (the API server's local file if it has one, else the last worker's); a
        deployment that wants whole logs in the UI configures remote logging (README)."""
        folder = Path(
            f"dag_id={dag_id}",
            f"run_id={run_id}",
            f"task_id={task_id}",
            *([f"map_index={map_index}"] if map_index >= 0 else []),
        )
        roots = [self.task_log_dir, *(worker.folder / "logs" for worker in self.workers)]
        parts = sorted(
            (part for root in roots for part in (root / folder).glob(f"attempt={try_number}.log*")),
            key=lambda part: part.stat().st_mtime,
        )
        return "\n".join(part.read_text(errors="replace") for part in parts)

    def worker(self, address: str) -> CeleryWorker:
        """The worker whose address a task instance names as its ``hostname``."""
        return next(w for w in self.workers if w.address == address)

    def kill_worker(self, worker: CeleryWorker) -> list[int]:
        """SIGKILL the worker and everything it started (a lost machine); its log server stays, as a
        machine's disk would. Returns the pids killed."""
        return self.kill_session(worker.name)
