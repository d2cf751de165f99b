"""ConnectBackend: each try works in a session on a long-lived Spark Connect server.

No JVM starts per stage: the application file (or a Python callable) runs in the worker process
against a remote session, so a stage costs seconds, not a Spark application's start-up. Pipelined
outputs stay in the server as cached global temporary views, read by the consumers of the same region
execution, never written to S3. A try works in a warm session of its machine (``session_slots.py``:
Spark starts a session's Python processes once, not per try), hands it on reset when its work ended,
and releases it otherwise; either way it closes its client: an open one keeps the process alive.
"""

from __future__ import annotations

import hashlib
import os
import runpy
import socket
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

from airflow_ft_provider.execution.connect_logs import quiet_abandoned_releases
from airflow_ft_provider.execution.connect_operations import first_line, join, release
from airflow_ft_provider.execution.connect_sessions import (
    SESSION_KEY,
    TrySession,
    previous_session,
)
from airflow_ft_provider.execution.contracts import StageSettings, WrittenOutput
from airflow_ft_provider.execution.session_slots import SessionSlots, SlotLease, code_digest, join_slot, reset
from airflow_ft_provider.execution.submit import output_missing, runtime_zip, spark_side_modules
from airflow_ft_provider.execution.task_state import TaskStateStore
from airflow_ft_provider.spark import stage_io
from airflow_ft_provider.spark.spec import OutputSpec, StageSpec, StoreCredentials
from airflow_ft_provider.task_log import TaskLog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from airflow_ft_provider.partitions.pipelined_handle import EngineLocation


def server_identity(url: str) -> str:
    """``sc://host:port`` of a connection URL: what a handle may record (no user id, no token)."""
    return f"sc://{urllib.parse.urlparse(url).netloc}"


def _import_root(py_file: str) -> str:
    """What goes on sys.path for a --py-files entry: an archive itself, a module's folder."""
    full = os.path.abspath(py_file)
    return full if full.endswith((".zip", ".egg", ".whl")) else os.path.dirname(full)


def drop_views(
    conn_id: str, views: Iterable[EngineLocation], log: TaskLog, *, connect_timeout: float = 5.0
) -> list[str]:
    """Drop the global temporary views (``EngineLocation``s) that the server of ``conn_id`` keeps for
    a run that ended; the names dropped. A view recorded on another server is left (named in the log);
    a server that does not answer took its views with it."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    url = SparkConnectHook(conn_id).get_connection_url()
    server = server_identity(url)
    mine = sorted({v.view for v in views if v.server == server})
    elsewhere = sorted({f"{v.server}/{v.view}" for v in views if v.server != server})
    if elsewhere:
        log.warning(
            "pipelined views %s are on other servers than %s (connection %s); not released",
            elsewhere,
            server,
            conn_id,
        )
    if not mine:
        return []
    host, _, port = urllib.parse.urlparse(server).netloc.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=connect_timeout).close()
    except OSError as err:
        log.warning("Spark Connect %s does not answer (%s): its views %s went with it", server, err, mine)
        return []
    quiet_abandoned_releases()
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession.builder.remote(url).create()
    dropped = []
    try:
        for view in mine:
            if session.catalog.dropGlobalTempView(view):
                dropped.append(view)
    finally:
        session.stop()
    return dropped


class ConnectBackend:
    """Runs the stage on a Spark Connect session; keeps pipelined outputs in the server."""

    name = "spark-connect"
    keeps_pipelined = True

    def __init__(
        self,
        stage: StageSettings,
        *,
        conn_id: str,
        log: TaskLog,
        state: TaskStateStore | None = None,
        try_number: int = 1,
    ) -> None:
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        self.stage = stage
        self.conn_id = conn_id
        self.log = log
        self.state = state  # where tries record their session (connect_sessions.py)
        self.try_number = try_number
        self._earlier_stopped = False
        self.url = SparkConnectHook(conn_id).get_connection_url()
        self.server = server_identity(self.url)
        self.session: ConnectSession | None = None
        self.try_session: TrySession | None = None  # recorded for the next try (connect_sessions.py)
        self.outputs: dict[str, WrittenOutput] = {}
        self.slots = SessionSlots(self.server, code_digest(self._shipped_files()))
        self.lease: SlotLease | None = None  # the warm session this try holds (session_slots.py)
        self.found_conf: dict[str, str] = {}  # the session's conf as this try found it

    # -- session ------------------------------------------------------------------------------------
    def __enter__(self) -> ConnectBackend:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(clean=exc_type is None)

    def _shipped_files(self) -> list[Path]:
        """What a try ships to its session (``run``): the Spark-side modules, the stage's py_files."""
        return [*spark_side_modules(), *(Path(f) for f in self._py_files() if Path(f).is_file())]

    def _py_files(self) -> list[str]:
        """The stage's ``py_files`` (the spark-submit argument: comma-separated paths)."""
        return [f for f in str(self.stage.spark_submit_kwargs.get("py_files") or "").split(",") if f]

    def open(self) -> ConnectSession:
        """This try's session (a new one if the application stopped it), with the stage's settings."""
        if self.session is not None and not self.session.is_stopped:
            return self.session
        from airflow_ft_provider.execution.spark_client import preloaded

        was_preloaded, started = preloaded(), time.monotonic()
        import pyspark.sql.connect.session  # noqa: F401 - the import the log line times

        if was_preloaded:
            self.log.info("Spark Connect client: preloaded in the worker")
        else:
            self.log.info(
                "Spark Connect client: imported in %.1f s (see [ft_provider] preload_stage_clients)",
                time.monotonic() - started,
            )
        quiet_abandoned_releases()
        if not self._earlier_stopped:
            self._earlier_stopped = True
            self._stop_earlier_try()
        if self.session is not None and self.lease is not None:  # the application stopped its client:
            self.session, _ = join_slot(self.url, self.slots, self.lease, self.log)  # the server kept it
        else:
            self.session = self._join_slot_session()
        mine = self.try_session = TrySession(self.server, self.session.session_id, self.try_number)
        if self.state is not None:
            try:
                self.state.set(SESSION_KEY, mine.to_json())
            except Exception as err:  # noqa: BLE001 - the work goes on; only its clean-up is weaker
                self.log.info("could not record this try's Spark Connect session (%s)", err)
        static = []
        for key, value in self.stage.conf.items():
            if self.session.conf.isModifiable(key):
                self.session.conf.set(key, str(value))
            else:
                static.append(key)
        if static:
            self.log.info(
                "Spark Connect %s: %s are settings of the server, not of a session; not applied",
                self.server,
                ", ".join(sorted(static)),
            )
        return self.session

    def _join_slot_session(self) -> ConnectSession:
        """This machine's warm session for the try's code (``session_slots.py``), or a fresh one when
        every slot is taken; its conf as found is kept, to hand it on unchanged."""
        if self.lease is None:
            self.lease = self.slots.acquire()
        session, self.found_conf = join_slot(self.url, self.slots, self.lease, self.log)
        return session

    def _stop_earlier_try(self) -> None:
        """Interrupt what an earlier try of this task left running in its session (its worker died),
        so that two computations of one partition never run at once; then release that session."""
        earlier, passed_over = previous_session(self.state)
        if passed_over:
            self.log.info("%s", passed_over)
        if earlier is None or earlier.try_number >= self.try_number:
            return
        if earlier.server != self.server:
            self.log.info("try %d worked on %s: nothing to stop here", earlier.try_number, earlier.server)
            return
        try:
            interrupted = release(join(self.url, earlier))
        except Exception as err:  # noqa: BLE001 - a session already gone has nothing left running
            self.log.info(
                "try %d's Spark Connect session has ended, nothing of it is left running (%s)",
                earlier.try_number,
                first_line(err),
            )
            return
        if interrupted:
            self.log.warning(
                "interrupted %d operations that try %d left running on %s (session %s): its worker is gone",
                len(interrupted),
                earlier.try_number,
                self.server,
                earlier.session_id,
            )
        else:
            self.log.info("try %d's Spark Connect session had nothing running", earlier.try_number)

    def close(self, *, clean: bool = False) -> None:
        """End the try's session. ``clean`` (its Spark work ended): reset it and hand it on to the next
        try on this machine; otherwise release it, and the slot opens a new one next time."""
        session, lease, self.session, self.lease = self.session, self.lease, None, None
        handed_on = False
        try:
            if session is not None and lease is not None and clean and session.is_stopped:
                session, _ = join_slot(self.url, self.slots, lease, self.log)  # an application's stop()
            if session is not None and lease is not None and clean:
                handed_on = self._reset(session)
            if session is not None:
                session.release_session_on_close = not handed_on
                session.stop()
        finally:
            if lease is not None:
                self.slots.release(lease, clean=handed_on)

    def _reset(self, session: ConnectSession) -> bool:
        """The session as the try found it, and no record that a later try of this task could take for
        work left running in it. False: it could not be handed on."""
        try:
            reset(session, self.found_conf)
            if self.state is not None:
                self.state.delete(SESSION_KEY)
        except Exception as err:  # noqa: BLE001 - the next try then opens a session of its own
            self.log.info("Spark Connect session not handed on (%s)", first_line(err))
            return False
        return True

    # -- pipelined partitions kept in the server ----------------------------------------------------
    @staticmethod
    def view_name(partition: str, execution: str) -> str:
        """A global temporary view name for one execution of one partition (``partition`` names run,
        result and map index); hashed, as run ids hold characters a view name cannot."""
        return "ft_" + hashlib.sha256(f"{partition}|{execution}".encode()).hexdigest()[:40]

    def held_rows(self, view: str) -> int | None:
        """Counted by the server from the view's cached data (a recomputation if the cache was lost)."""
        session = self.open()
        if not session.catalog.tableExists(f"global_temp.{view}"):
            return None
        return int(session.table(f"global_temp.{view}").count())

    def drop(self, view: str) -> None:
        """Release a view and its cached data (dropping a cached view uncaches it)."""
        self.open().catalog.dropGlobalTempView(view)

    # -- the work -----------------------------------------------------------------------------------
    def run(
        self, spec: StageSpec, *, fail_in_app: bool = False, credentials: StoreCredentials | None = None
    ) -> None:
        """``credentials`` stay in this process; the registered source carries them to the executors."""
        stage, session = self.stage, self.open()
        if spec.store is not None:  # the executors' data path runs our Spark-side modules there
            with tempfile.TemporaryDirectory(prefix="ft-runtime-") as folder:
                session.addArtifacts(runtime_zip(Path(folder)), pyfile=True)
        running_stage = stage_io.in_process_stage(
            spec, fail_before_write=fail_in_app, credentials=credentials
        )
        with running_stage as running, self._connect_mode():
            if stage.python_callable is not None:  # its arguments as given (@ft_stage passes ints, dates…)
                # pyspark types its API with the classic SparkSession; a Connect session stands in for it
                io = stage_io.for_session(cast("SparkSession", session))
                stage.python_callable(session, io, *stage.application_args)
            elif stage.application is not None:  # a file gets them on its command line
                self._run_file(stage.application, [str(a) for a in stage.application_args])
            else:  # the pipeline refuses such a stage when the DAG is parsed
                raise ValueError(f"stage {stage.task_id!r} gives neither application= nor python_callable=")
        self.outputs = {
            name: WrittenOutput(rows, running.contents.get(name)) for name, rows in running.rows.items()
        }

    @contextmanager
    def _connect_mode(self) -> Iterator[None]:
        """What PySpark reads to act as a Connect client: ``SparkSession.builder.getOrCreate()`` then
        returns our session and ``pyspark.sql.functions`` build Connect expressions. Plus the stage's
        ``env_vars``; all restored afterwards."""
        env = {"SPARK_REMOTE": self.url, "SPARK_CONNECT_MODE_ENABLED": "1", **self.stage.env_vars}
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def _run_file(self, path: str, args: list[str]) -> None:
        """``python app.py args`` in this process: the application's folder and its ``py_files`` are
        importable (as under spark-submit), and the py_files are shipped to the server for UDFs."""
        py_files = self._py_files()
        self.open().release_session_on_close = False  # an app's spark.stop(): the slot's session stays warm
        if py_files:
            self.open().addArtifacts(*py_files, pyfile=True)
        saved_argv, saved_path = sys.argv, list(sys.path)
        sys.argv = [path, *args]
        sys.path[:0] = [os.path.dirname(os.path.abspath(path)), *map(_import_root, py_files)]
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as end:
            if end.code not in (None, 0):
                raise RuntimeError(f"the application {path} exited with status {end.code!r}") from None
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path

    def written(self, output: OutputSpec) -> WrittenOutput:
        if output.result not in self.outputs:
            raise output_missing(self.stage, output.result)
        return self.outputs[output.result]

    def kill(self) -> None:
        """Stop the session's running Spark operations (on_kill), then the session."""
        if self.session is not None and not self.session.is_stopped:
            try:
                self.session.interruptAll()  # the slot's session is this try's alone while it runs
            finally:
                self.close(clean=False)
