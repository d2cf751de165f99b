"""A real, running Airflow 3.3 for end-to-end tests (pytest plugin).

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
a JWT can be obtained, then checks the DAGs (unpaused at creation) and import errors. Teardown
terminates every process the instance started -- including task processes that run in their own
process groups or were orphaned -- by their session id (each component starts a new session).

Fixtures
--------
``live_airflow``
    Session-scoped default instance: DAGs from ``tests/e2e/dags/`` and ``dags_examples/``, on
    PostgreSQL (``postgres_server``).
``postgres_server``
    Session-scoped PostgreSQL server (:class:`ft_harness.services.postgres.PostgresServer`).
``live_airflow_factory``
    Session-scoped factory for other DAG sets / settings; instances are cached by their arguments
    and stopped at the end of the session::

        @pytest.fixture(scope="module")
        def my_airflow(live_airflow_factory):
            return live_airflow_factory(dags=[MY_DAGS], env={"AIRFLOW__CORE__PARALLELISM": "4"})

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

Test-friendly settings (see :meth:`LiveAirflow.environment`; override any via ``env``): admin/admin
and a read-only viewer/viewer, DAGs unpaused at creation (so DAGs with a schedule start running too),
parallelism 8, new DAG files found within 5 s, ``[scheduler] task_instance_heartbeat_timeout`` 20 s
(checked every 2 s), task and component logs under the home (``task_log_files()``,
``describe_logs()``, ``describe_run()``).
``TaskStateRecorder`` (in ``airflow_rest``) records short-lived TI states in the background.

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
import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from ft_harness.airflow.airflow_rest import AirflowRestClient, format_task_instances

REPO_ROOT = Path(__file__).resolve().parents[2]
E2E_DAGS_DIR = REPO_ROOT / "tests" / "e2e" / "dags"
EXAMPLE_DAGS_DIR = REPO_ROOT / "dags_examples"
MARKER_ENV = "FT_LIVE_AIRFLOW_INSTANCE"
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
# [scheduler] task_instance_heartbeat_timeout: how soon a lost worker is noticed. Not lower: a task
# whose heartbeats stall that long on a saturated 2-core machine is declared dead while it works.
HEARTBEAT_TIMEOUT_S = 30

__all__ = [
    "AirflowRestClient",
    "LiveAirflow",
    "LiveAirflowError",
    "live_airflow",
    "live_airflow_factory",
    "postgres_server",
]


class LiveAirflowError(RuntimeError):
    """Airflow did not start (or died); the message carries log paths and tails."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


_BOOTSTRAP = """
import os, sqlite3
url = os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
if url.startswith("sqlite:///"):
    # WAL journal (persistent in the file): concurrent readers (API polling) never block the writers
    # (scheduler, execution API), which otherwise hit "database is locked" on a busy machine.
    with sqlite3.connect(url[len("sqlite:///"):]) as c:
        print(">>> journal_mode", c.execute("PRAGMA journal_mode=WAL").fetchone()[0], flush=True)
from airflow.configuration import write_default_airflow_configuration_if_needed
write_default_airflow_configuration_if_needed()
from airflow.cli import cli_parser
parser = cli_parser.get_parser()
for argv in (["db", "migrate"], ["dags", "reserialize"]):
    print(">>> airflow", *argv, flush=True)
    args = parser.parse_args(argv)
    args.func(args)
print(">>> bootstrap done", flush=True)
"""


class LiveAirflow:
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
        """The full environment every component runs with."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not (k.startswith(("AIRFLOW__", "AIRFLOW_CONN_")) or k == "AIRFLOW_HOME")
        }
        pythonpath = [str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        conn = {
            "conn_type": "http",
            "host": "127.0.0.1",
            "port": self.api_conn_port or self.port,
            "schema": "http",
            "login": self.service_username,
            "password": self.service_password,
        }
        env.update(
            {
                MARKER_ENV: self.instance_id,
                "FT_LIVE_AIRFLOW_SCRATCH": str(self.scratch),
                "FT_LIVE_AIRFLOW_URL": self.base_url,
                "PYTHONPATH": os.pathsep.join(pythonpath),
                "PYTHONUNBUFFERED": "1",
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW_CONN_AIRFLOW_API": json.dumps(conn),
                # -- core / executor
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                # Tasks at once: each is a Python process importing Airflow (and PySpark, on Spark
                # Connect); more than 8 on 2 cores only thrashes.
                "AIRFLOW__CORE__PARALLELISM": "8",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                # The scenarios, the demo, chaos and benchmarks inject faults through a run's ft_faults.
                "AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION": "True",
                # Airflow's defaults otherwise ([core] lazy_load_plugins = True): task processes fork
                # from executor workers that already hold the Spark Connect client all the same.
                "AIRFLOW__FT_PROVIDER__PRELOAD_STAGE_CLIENTS": "True",
                # SQLite: in WAL mode (set by the bootstrap), default 5 s busy timeout. A longer timeout
                # makes things worse: under load the API server can stall on the DB lock until the
                # timeout expires (thread pool exhausted by requests waiting for the lock), and a 30 s
                # stall fails the scheduler's heartbeat and re-runs tasks.
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.database_url,
                # -- auth: a known admin user (SimpleAuthManager reads passwords from this file)
                "AIRFLOW__CORE__AUTH_MANAGER": (
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": (
                    f"{self.username}:admin,{self.viewer_username}:viewer,{self.service_username}:user"
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
                "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
                # -- API server
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__BASE_URL": f"{self.base_url}/",
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API__EXPOSE_CONFIG": "True",
                "AIRFLOW__API__EXPOSE_STACKTRACE": "True",  # 500 responses say what broke
                # -- log servers (defaults 8793/8794 would clash between concurrent instances)
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
                # -- fast DAG folder scanning: new files are found within 5 s and parsed at once;
                #    known files are re-parsed every 10 min (no test edits one; DAG callbacks jump the
                #    queue): re-parsing every DAG file each 30 s cost ~150 CPU-s a suite run
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
                "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "5",
                "AIRFLOW__DAG_PROCESSOR__PRINT_STATS_INTERVAL": "300",
                # -- bounded detection of dead task processes / lost workers
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_S),
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
                # (task heartbeats every 5 s, the default: more often only adds DB write load)
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "30",
                # The one scheduler must never declare itself dead: when a burst of task starts starves
                # its loop past the 30 s default, it marks its own job failed, "adopts" and resets every
                # running task, and its LocalExecutor can hang on shutdown (seen under a 32-task burst).
                "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "300",
                "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
            }
        )
        env.update(self.extra_env)
        return env

    # -- lifecycle -----------------------------------------------------------------------------------

    def _prepare_home(self) -> None:
        for d in (self.dags_folder, self.scratch, self.log_dir, self.task_log_dir):
            d.mkdir(parents=True, exist_ok=True)
        (self.home / "passwords.json").write_text(
            json.dumps(
                {
                    self.username: self.password,
                    self.viewer_username: self.viewer_password,
                    self.service_username: self.service_password,
                }
            )
            + "\n"
        )
        placed: dict[str, Path] = {}
        for src in self.dag_sources:
            if not src.exists():
                raise LiveAirflowError(f"DAG source {src} does not exist")
            children = sorted(src.iterdir()) if src.is_dir() else [src]
            for child in children:
                hidden = child.name == "__pycache__" or child.name.startswith(".")
                if hidden and child.name != ".airflowignore":
                    continue
                if child.name in placed:
                    raise LiveAirflowError(f"{child} clashes with {placed[child.name]} in the dags folder")
                placed[child.name] = child
                dst = self.dags_folder / child.name
                if child.is_dir():
                    shutil.copytree(child, dst, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy2(child, dst)

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

            boot = self._spawn("bootstrap", [sys.executable, "-c", _BOOTSTRAP])
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

    def kill_session(self, name: str, sig: int = signal.SIGKILL) -> list[int]:
        """Send ``sig`` to every process of a component's session (it and all it started); wait for the
        component's own process. Returns the pids signalled."""
        proc = self.procs[name]
        self._former_sessions.add(proc.pid)  # whatever escapes the kill stays ours, for the teardown
        pids = [pid for pid in self._pids() if self._session_of(pid) == proc.pid]
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        return pids

    @staticmethod
    def _pids() -> list[int]:
        return [
            int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and int(e.name) != os.getpid()
        ]

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

    # -- diagnostics ---------------------------------------------------------------------------------

    def task_log_files(self, dag_id: str, run_id: str | None = None) -> list[Path]:
        base = self.task_log_dir / f"dag_id={dag_id}"
        if run_id:
            base = base / f"run_id={run_id}"
        return sorted(base.rglob("*.log")) if base.exists() else []

    def provider_cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``airflow-ft ARGS`` (the provider's CLI) as an operator would run it beside this Airflow:
        with its environment (connections, store), in a process of its own."""
        return subprocess.run(
            [sys.executable, "-m", "airflow_ft_provider.cli", *args],
            env={**self.environment(), "PYTHONPATH": str(REPO_ROOT)},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def dag_processor_log(self, dag_file: str) -> str:
        """What the DAG processor logged while parsing ``dag_file`` (a file name in the DAGs folder) and
        running its DAG callbacks, oldest day first."""
        days = (self.task_log_dir / "dag_processor").glob("*")
        logs = sorted(log for day in days if not day.is_symlink() for log in day.glob(f"*/{dag_file}.log"))
        return "".join(path.read_text(errors="replace") for path in logs)

    def requeue_dag_file(self, dag_file: str) -> None:
        """Have the DAG processor parse ``dag_file`` again at its next refresh (within 5 s), with the DAG
        callbacks waiting for it. Airflow 3.3 leaves a callback that arrives while its file is being
        parsed pending until the file is queued again: ``min_file_process_interval`` (10 min here)."""
        (self.dags_folder / dag_file).touch()

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        """A try's log, as the API server serves it."""
        return self.client.task_log(dag_id, run_id, task_id, try_number, map_index=map_index)

    def describe_logs(self, tail: int = 30) -> str:
        parts = [f"AIRFLOW_HOME={self.home}  (API {self.base_url})"]
        for name, path in self.logs.items():
            proc = self.procs.get(name)
            rc = proc.poll() if proc else None
            parts.append(f"--- {name} log: {path} (exit code: {rc}) --- last {tail} lines:")
            parts.append(_tail(path, tail))
        return "\n".join(parts)

    def describe_run(self, dag_id: str, run_id: str) -> str:
        """Run state, task-instance table and task log file paths -- for assertion messages."""
        try:
            run = self.client.get_dag_run(dag_id, run_id)
            tis = self.client.task_instances(dag_id, run_id)
            head = f"run {dag_id}/{run_id}: {run['state']}\n{format_task_instances(tis)}"
        except Exception as e:  # noqa: BLE001  (the API may be the thing that broke)
            head = f"run {dag_id}/{run_id}: could not query the API: {e!r}"
        files = "\n".join(f"  {p}" for p in self.task_log_files(dag_id, run_id))
        return f"{head}\ntask logs:\n{files or '  (none)'}"

    # -- teardown ------------------------------------------------------------------------------------

    @staticmethod
    def _session_of(pid: int) -> int | None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        # "pid (comm) state ppid pgrp session ..." -- comm may contain spaces/parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        return int(fields[3])

    def _session_ids(self) -> set[int]:
        return {p.pid for p in self.procs.values()} | self._former_sessions

    def owns_pid(self, pid: int) -> bool:
        """Whether ``pid`` belongs to this instance (any component, worker, task or orphan of them).

        Every component is started in a new session; its children (LocalExecutor workers,
        supervisors, task processes -- which get their own process *group* -- and the DAG
        processor's parsers) keep that session id, even when orphaned. The marker variable
        ``FT_LIVE_AIRFLOW_INSTANCE`` is not reliable: ``setproctitle`` overwrites
        ``/proc/<pid>/environ`` of the processes that set a title.
        """
        return self._session_of(pid) in self._session_ids()

    def _owned_pids(self) -> list[int]:
        """PIDs of all live processes of this instance (by session id or env marker)."""
        sessions = self._session_ids()
        needle = f"{MARKER_ENV}={self.instance_id}".encode()
        pids = []
        for pid in self._pids():
            if self._session_of(pid) in sessions:
                pids.append(pid)
                continue
            try:
                if needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    pids.append(pid)
            except OSError:
                continue
        return pids

    def stop(self, grace: float = 5.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._client is not None:
            self._client.close()
        # SIGTERM each component's process group (graceful), then SIGKILL whatever is left --
        # including task processes in their own groups and orphans (found by the env marker).
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for _ in range(3):
            pids = self._owned_pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self._own_home and not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> LiveAirflow:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- pytest integration ------------------------------------------------------------------------------


class LiveAirflowFactory:
    """Starts (once per distinct argument set) and remembers instances; stops them all at the end."""

    def __init__(self, base_tmp: Path):
        self._base_tmp = base_tmp
        self._instances: dict[str, LiveAirflow] = {}

    @property
    def base_tmp(self) -> Path:
        return self._base_tmp

    def __call__(
        self,
        dags: Iterable[str | os.PathLike[str]] = (),
        *,
        env: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> LiveAirflow:
        dags = [str(Path(d).resolve()) for d in dags]
        key = json.dumps([dags, sorted((env or {}).items()), sorted(kwargs.items())], default=str)
        inst = self._instances.get(key)
        if inst is not None and inst.is_alive():
            return inst
        home = Path(tempfile.mkdtemp(prefix="home-", dir=self._base_tmp))
        inst = LiveAirflow(dags, env=env, home=home, **kwargs)
        t0 = time.monotonic()
        inst.start()
        sys.stderr.write(
            f"\n[live_airflow] started in {time.monotonic() - t0:.1f}s "
            f"({', '.join(f'{k}={v:.1f}s' for k, v in inst.timings.items())}); "
            f"home={inst.home} api={inst.base_url}\n"
        )
        self._instances[key] = inst
        return inst

    @property
    def instances(self) -> list[LiveAirflow]:
        return list(self._instances.values())

    def stop_all(self) -> None:
        for inst in self._instances.values():
            inst.stop()


_FACTORIES: list[LiveAirflowFactory] = []


LIVE_CACHE_BOUND = "20 mb"


@pytest.fixture(scope="session")
def live_airflow_factory(tmp_path_factory: pytest.TempPathFactory):
    """Factory: ``live_airflow_factory(dags=[...], env={...}) -> LiveAirflow`` (cached per session)."""
    factory = LiveAirflowFactory(tmp_path_factory.mktemp("live-airflow"))
    _FACTORIES.append(factory)
    try:
        yield factory
    finally:
        factory.stop_all()
        _FACTORIES.remove(factory)


@pytest.fixture(scope="session")
def e2e_store_url(s3_endpoint) -> str:
    """A bucket for the partition stores of the e2e pipelines (each DAG run has its own prefix)."""
    bucket = f"ft-e2e-{secrets.token_hex(4)}"
    s3_endpoint.client().create_bucket(Bucket=bucket)
    return f"s3://{bucket}/pipelines/"


def pipeline_environment(s3_endpoint, store_url: str, spark_connect=None) -> dict[str, str]:
    """What pipeline DAGs need in every component: ``aws_default`` on the S3 endpoint, Spark as
    ``spark_default`` -- the given Spark Connect server, else local ``spark-submit`` -- and local
    ``spark-submit`` as ``spark_submit`` too, the partition store URL and the Spark environment of
    this virtualenv."""
    from ft_harness.services.spark_cluster import spark_environment

    spark = spark_environment()
    submit = json.dumps({"conn_type": "spark", "host": "local[1]"})
    return {
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(
            {
                "conn_type": "aws",
                "login": s3_endpoint.access_key,
                "password": s3_endpoint.secret_key,
                "extra": {"endpoint_url": s3_endpoint.url, "region_name": s3_endpoint.region},
            }
        ),
        "AIRFLOW_CONN_SPARK_DEFAULT": submit
        if spark_connect is None
        else json.dumps(spark_connect.connection()),
        "AIRFLOW_CONN_SPARK_SUBMIT": submit,
        "AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL": store_url,
        "FT_E2E_APPS": str(REPO_ROOT / "tests" / "e2e" / "apps"),
        **{
            k: spark[k]
            for k in (
                "PATH",
                "SPARK_HOME",
                "PYSPARK_PYTHON",
                "PYSPARK_DRIVER_PYTHON",
                "SPARK_LOCAL_IP",
                "SPARK_SUBMIT_OPTS",
            )
        },
    }


@pytest.fixture(scope="session")
def s3_proxy(s3_endpoint):
    """A pausable TCP proxy in front of the S3 test endpoint (chaos: "S3 down for a few seconds");
    None for an https endpoint, which a plain TCP proxy cannot stand in for."""
    from ft_harness.services.tcp_proxy import PausableProxy

    target = urllib.parse.urlparse(s3_endpoint.url)
    if target.scheme != "http":
        yield None
        return
    proxy = PausableProxy(target.hostname, target.port or 80)
    yield proxy
    proxy.close()


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for the session's live Airflow instances (one database each)."""
    from ft_harness.services.postgres import PostgresServer

    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def live_airflow(
    live_airflow_factory: LiveAirflowFactory,
    s3_endpoint,
    s3_proxy,
    e2e_store_url,
    spark_connect_launched,
    postgres_server,
    statsd_listener,
) -> LiveAirflow:
    """The default running Airflow: DAGs of ``tests/e2e/dags/`` and ``dags_examples/``, with the
    environment of :func:`pipeline_environment` (stages on the session's Spark Connect server unless a
    DAG names ``spark_submit``), metadata on PostgreSQL, metrics to the session's StatsD listener, a
    bounded task-local partition cache; its components reach S3 through ``s3_proxy``."""
    sources = [p for p in (E2E_DAGS_DIR, EXAMPLE_DAGS_DIR) if p.is_dir()]
    endpoint = dataclasses.replace(s3_endpoint, url=s3_proxy.url) if s3_proxy is not None else s3_endpoint
    env = {
        **pipeline_environment(endpoint, e2e_store_url, spark_connect_launched),
        **statsd_listener.environment(),
        # Task-local recovery on, bounded (smaller than the default, so that the suite trims it).
        "AIRFLOW__FT_PROVIDER__PARTITION_STORE_CACHE_DIR": str(
            live_airflow_factory.base_tmp / "partition-cache"
        ),
        "AIRFLOW__FT_PROVIDER__PARTITION_STORE_CACHE_MAX_SIZE": LIVE_CACHE_BOUND,
        # Every run end sweeps its pipeline's expired runs (tests/e2e/test_lifecycle.py), not once an hour
        "AIRFLOW__FT_PROVIDER__PARTITION_STORE_SWEEP_INTERVAL": "0 s",
    }
    database = postgres_server.create_database(f"airflow_{secrets.token_hex(4)}")
    # starts while the Connect server does
    airflow = live_airflow_factory(sources, env=env, database_url=database)
    spark_connect_launched.wait_until_ready()
    return airflow


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """On a failing test that used a live Airflow, attach component log paths and tails."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    fixturenames = getattr(item, "fixturenames", ())
    if not any(name.startswith("live_airflow") for name in fixturenames):
        return
    for factory in _FACTORIES:
        for inst in factory.instances:
            report.sections.append((f"live airflow {inst.base_url}", inst.describe_logs(tail=25)))
