"""A real, running Airflow 3.3 for end-to-end tests, the demo and the benchmarks.

What it starts, in a temporary ``AIRFLOW_HOME`` (LocalExecutor + SimpleAuthManager; the metadata
database is SQLite in the home, or the URL given -- the ``live_airflow`` fixture uses a PostgreSQL
server of its own, :mod:`ft_harness.services.postgres`):

1. one bootstrap process: ``airflow db migrate`` then ``airflow dags reserialize`` (so every DAG --
   and every import error -- is in the metadata DB before the scheduler starts; no waiting for the
   DAG processor's first scan);
2. ``airflow api-server`` (1 worker, 127.0.0.1, free port), ``airflow scheduler``,
   ``airflow dag-processor`` and ``airflow triggerer``, each in its own process group with its own
   log file under ``<home>/component-logs/``.

It waits until ``/api/v2/monitor/health`` reports scheduler, triggerer and DAG processor healthy and
a JWT can be obtained, then checks the DAGs (unpaused at creation) and import errors. Teardown ends
every process the instance started, by session (``live_sessions.py``). The pytest fixtures that start
one are ``live_fixtures.py``'s; its environment and home are ``live_environment.py``'s.

Using it::

    @pytest.mark.airflow
    def test_something(live_airflow):
        api = live_airflow.client              # AirflowRestClient, already authenticated
        run = api.trigger_dag_run("my_dag", conf={"x": 1})
        final = api.wait_for_dag_run("my_dag", run["dag_run_id"], timeout=120)
        assert final["state"] == "success", live_airflow.describe_run("my_dag", run["dag_run_id"])

Inside tasks, the connection ``airflow_api`` (http; host/port of this API server, login/password of the
service account ``ft-failover``, role "user", password ``service_password``) is available
(``AIRFLOW_CONN_AIRFLOW_API``), and ``FT_LIVE_AIRFLOW_SCRATCH`` names a directory shared with the test
(``live_airflow.scratch``). The repository root is on the components' ``PYTHONPATH``, so DAGs may ``from
ft_harness.airflow.airflow_rest import AirflowRestClient``.

Test-friendly settings (``live_environment.component_environment``; override any via ``env``):
admin/admin and a read-only viewer/viewer, DAGs unpaused at creation, parallelism 8, new DAG files
found within 5 s, ``[scheduler] task_instance_heartbeat_timeout`` 30 s (checked every 2 s), task and
component logs under the home (``live_diagnostics.py``: ``describe_logs()``, ``describe_run()``).
``TaskStateRecorder`` (``task_states.py``) records short-lived TI states in the background.

SQLite caveat (instances without ``database_url``, e.g. the demo's): the file is in WAL mode, yet under
load a write can still fail with "database is locked" after the 5 s busy timeout -- seen on
``clearTaskInstances`` and on the execution API recording a successful try (which Airflow then marks
failed). ``AirflowRestClient`` is the provider's ``AirflowApiHook``: it retries idempotent calls.

The instance can also be used without pytest (e.g. from a demo script)::

    with LiveAirflow(dags=["dags_examples"]) as af:
        print(af.base_url, af.username, af.password)
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ft_harness.airflow.airflow_rest import AirflowRestClient
from ft_harness.airflow.live_diagnostics import AirflowDiagnostics
from ft_harness.airflow.live_environment import (
    BOOTSTRAP,
    REPO_ROOT,
    LiveAirflowError,
    component_environment,
    free_port,
    prepare_home,
)
from ft_harness.airflow.live_sessions import ComponentSessions

E2E_DAGS_DIR = REPO_ROOT / "tests" / "e2e" / "dags"
EXAMPLE_DAGS_DIR = REPO_ROOT / "dags_examples"
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")

__all__ = ["AirflowRestClient", "LiveAirflow", "LiveAirflowError", "free_port"]


class LiveAirflow(AirflowDiagnostics, ComponentSessions):
    """One running Airflow (api-server, scheduler, dag-processor, triggerer) in a temp home.

    :param dags: files and/or directories copied into the instance's dags folder. A directory's
        *contents* are merged into the folder root (so helper modules next to the DAG files stay
        importable as top-level modules); a file is copied to the root. Name clashes are an error.
    :param env: extra environment for all components (e.g. ``AIRFLOW__...`` overrides,
        ``AIRFLOW_CONN_...`` connections); applied last, so it overrides the defaults below.
    :param home: the ``AIRFLOW_HOME`` to use (default: a new temporary directory, removed on stop
        unless ``keep_home`` or the env var ``FT_LIVE_AIRFLOW_KEEP`` is set).
    :param fail_on_import_errors: raise at start if any DAG file failed to import.
    :param startup_timeout: seconds to wait for the components to become healthy.
    :param database_url: the metadata database (SQLAlchemy URL of an empty database); default: SQLite
        in the home.
    :param api_conn_port: the port the ``airflow_api`` connection (the provider's REST client) uses,
        e.g. a proxy's in front of the API server; default: the API server's own.
    :param dags_folder: a DAG folder to use in place instead of the home's ``dags`` (``dags`` are
        then copied into it, if any: give none to leave the folder as it is).
    """

    username = "admin"
    password = "admin"
    # A read-only user (SimpleAuthManager role "viewer"): may look at runs, may not clear tasks.
    viewer_username = "viewer"
    viewer_password = "viewer"
    # The airflow_api connection's account (role "user": may clear task instances), as a deployment
    # would have one for region failover; its password is made per instance, so tests can look for it.
    service_username = "ft-failover"

    def __init__(
        self,
        dags: Iterable[str | os.PathLike[str]] = (),
        *,
        env: Mapping[str, str] | None = None,
        home: str | os.PathLike[str] | None = None,
        keep_home: bool | None = None,
        fail_on_import_errors: bool = True,
        startup_timeout: float = 180.0,
        database_url: str | None = None,
        api_conn_port: int | None = None,
        dags_folder: str | os.PathLike[str] | None = None,
    ):
        self.dag_sources = [Path(d).resolve() for d in dags]
        self.extra_env = dict(env or {})
        self._own_home = home is None
        self.home = Path(home) if home else Path(tempfile.mkdtemp(prefix="ft-airflow-"))
        self.keep_home = bool(os.environ.get("FT_LIVE_AIRFLOW_KEEP")) if keep_home is None else keep_home
        self.fail_on_import_errors = fail_on_import_errors
        self.startup_timeout = startup_timeout
        # The metadata database: SQLite in the home (the default: nothing else to run), or e.g. a
        # PostgreSQL database of ft_harness.services.postgres (what the test suite uses).
        self.database_url = database_url or f"sqlite:///{self.home}/airflow.db"
        self.api_conn_port = api_conn_port

        # A folder of the caller's, used in place (edits are picked up), or a copy of ``dags`` in the home.
        self.dags_folder = Path(dags_folder).resolve() if dags_folder else self.home / "dags"
        self.scratch = self.home / "scratch"
        self.log_dir = self.home / "component-logs"
        self.task_log_dir = self.home / "logs"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.instance_id = uuid.uuid4().hex
        self.service_password = f"ft-svc-{secrets.token_hex(12)}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._spawn_env: dict[str, dict[str, str]] = {}
        self._former_sessions: set[int] = set()  # of restarted components: their orphans are still ours
        self.logs: dict[str, Path] = {}
        self.timings: dict[str, float] = {}
        self.dag_ids: list[str] = []
        self._client: AirflowRestClient | None = None
        self._stopped = False

    # -- environment ---------------------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        """The full environment every component runs with (``live_environment.py``)."""
        return component_environment(self)

    # -- lifecycle -----------------------------------------------------------------------------------

    def _prepare_home(self) -> None:
        prepare_home(self)

    def _spawn(
        self, name: str, argv: list[str], env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a component in a new session (``env``: overrides of the common environment)."""
        log_path = self.log_dir / f"{name}.log"
        self.logs[name] = log_path
        with open(log_path, "ab") as log_file:
            proc = subprocess.Popen(
                argv,
                env={**self._env, **(env or {})},
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: killpg at teardown
            )
        self.procs[name] = proc
        self._spawn_env[name] = dict(env or {})
        return proc

    def start(self) -> LiveAirflow:
        t0 = time.monotonic()
        atexit.register(self.stop)
        try:
            self._prepare_home()
            self._env = self.environment()
            airflow_bin = str(Path(sys.executable).with_name("airflow"))

            boot = self._spawn("bootstrap", [sys.executable, "-c", BOOTSTRAP])
            try:
                rc = boot.wait(timeout=self.startup_timeout)
            except subprocess.TimeoutExpired:
                raise LiveAirflowError("bootstrap (db migrate + dags reserialize) timed out") from None
            if rc != 0:
                raise LiveAirflowError(f"bootstrap (db migrate + dags reserialize) exited with {rc}")
            self.timings["bootstrap"] = time.monotonic() - t0

            # (The API server checks the schema at start-up, so it cannot overlap the bootstrap.)
            self._spawn(
                "api-server",
                [
                    airflow_bin,
                    "api-server",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--workers",
                    "1",
                ],
            )
            for name in ("scheduler", "dag-processor", "triggerer"):
                self._spawn(name, [airflow_bin, name])
            self._start_workers()
            self._wait_until_healthy(t0)
            self.timings["healthy"] = time.monotonic() - t0
            self._check_dags()
            self.timings["ready"] = time.monotonic() - t0
        except BaseException as e:
            msg = f"Live Airflow failed to start: {e}\n{self.describe_logs()}"
            self.stop()
            if isinstance(e, LiveAirflowError):
                raise LiveAirflowError(msg) from None
            raise
        return self

    def _start_workers(self) -> None:
        """Executor workers that are components of their own (none: LocalExecutor runs in the scheduler)."""

    def airflow_command(self, *args: str) -> list[str]:
        return [str(Path(sys.executable).with_name("airflow")), *args]

    def restart_component(self, name: str, *, kill: bool = True) -> None:
        """Stop a component (``kill``: SIGKILL its whole session, as a crash would; else SIGTERM, as a
        deployment's restart would) and start it again with the same command and environment."""
        self.start_component(name, self.stop_component(name, kill=kill))

    def stop_component(self, name: str, *, kill: bool = True) -> list[str]:
        """Stop a component as ``restart_component`` does; its command, for ``start_component``."""
        proc = self.procs[name]
        argv = proc.args if isinstance(proc.args, list) else [str(proc.args)]
        self.kill_session(name, signal.SIGKILL if kill else signal.SIGTERM)
        return list(argv)

    def start_component(self, name: str, argv: list[str]) -> None:
        """Start a stopped component again with its command and environment."""
        self._spawn(name, argv, self._spawn_env.get(name))

    def restart_exited(self) -> list[str]:
        """Start again every component that has exited, as a deployment's supervisor would (systemd's
        ``Restart=always``, a Kubernetes pod's restart policy); their names."""
        exited = [n for n, proc in self.procs.items() if n != "bootstrap" and proc.poll() is not None]
        for name in exited:
            self.restart_component(name)
        return exited

    def _check_alive(self) -> None:
        for name, proc in self.procs.items():
            if name != "bootstrap" and proc.poll() is not None:
                raise LiveAirflowError(f"component {name} exited with code {proc.returncode}")

    def _wait_until_healthy(self, t0: float) -> None:
        probe = AirflowRestClient(self.base_url, self.username, self.password, timeout=5)
        deadline = t0 + self.startup_timeout
        last: Any = None
        try:
            while True:
                self._check_alive()
                try:
                    last = probe.health()
                    comps = [
                        last.get(c) or {} for c in ("metadatabase", "scheduler", "triggerer", "dag_processor")
                    ]
                    if all(c.get("status") == "healthy" for c in comps):
                        if "api_up" not in self.timings:
                            self.timings["api_up"] = time.monotonic() - t0
                        probe.get_token()
                        return
                    if "api_up" not in self.timings:
                        self.timings["api_up"] = time.monotonic() - t0
                except Exception as e:  # noqa: BLE001  (connection refused while starting, etc.)
                    last = e
                if time.monotonic() > deadline:
                    raise LiveAirflowError(f"not healthy after {self.startup_timeout:.0f}s; last: {last!r}")
                time.sleep(0.5)
        finally:
            probe.close()

    def _check_dags(self) -> None:
        api = self.client
        errors = api.import_errors()
        if errors and self.fail_on_import_errors:
            details = "\n\n".join(f"{e['filename']}:\n{e['stack_trace']}" for e in errors)
            raise LiveAirflowError(f"DAG import errors:\n{details}")
        dags = api.list_dags()
        self.dag_ids = sorted(d["dag_id"] for d in dags)
        paused = [d["dag_id"] for d in dags if d.get("is_paused")]
        for dag_id in paused:  # e.g. a DAG with is_paused_upon_creation=True
            api.set_paused(dag_id, False)

    def wait_for_dags(self, dag_ids: Iterable[str], timeout: float = 60.0) -> None:
        """Wait until the given DAGs are known to the API (e.g. files added after start)."""
        wanted = set(dag_ids)
        deadline = time.monotonic() + timeout
        while True:
            have = {d["dag_id"] for d in self.client.list_dags()}
            if wanted <= have:
                self.dag_ids = sorted(have)
                return
            if time.monotonic() > deadline:
                errs = self.client.import_errors()
                raise LiveAirflowError(
                    f"DAGs {sorted(wanted - have)} not parsed after {timeout:.0f}s; import errors: {errs}"
                )
            time.sleep(1)

    def add_dag_file(self, path: str | os.PathLike[str]) -> Path:
        """Copy a DAG file into the running instance's dags folder (picked up on the next scan)."""
        dst = self.dags_folder / Path(path).name
        shutil.copy2(path, dst)
        return dst

    @property
    def client(self) -> AirflowRestClient:
        """A shared, authenticated REST client (create more with :meth:`new_client`)."""
        if self._client is None:
            self._client = self.new_client()
        return self._client

    def new_client(self, timeout: float = 30.0) -> AirflowRestClient:
        return AirflowRestClient(self.base_url, self.username, self.password, timeout=timeout)

    def is_alive(self) -> bool:
        return not self._stopped and all(p.poll() is None for n, p in self.procs.items() if n != "bootstrap")

    def __enter__(self) -> LiveAirflow:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
