"""A fork server for ``dag.test()`` runs: Airflow imported once per Airflow home, each run a fresh fork.

A ``dag.test()`` process spends ~13 of its ~20 CPU-seconds before the DAG's first task: importing
Airflow, the provider and the Spark Connect client (~7 s), and building the in-process execution
API's versioned routes (~6 s; measured with py-spy). The server does that once, with the home's
environment, then forks a child per run. The child takes the run's whole environment (connections
and the provider's settings are read when a try needs them, never at import), writes its output to a
file and runs :func:`ft_harness.airflow.dag_test_runner.main`; nothing a run leaves behind reaches the next
one, which forks from the same untouched server. This is how Airflow's LocalExecutor runs tasks, too.

Protocol, one JSON line each way on the server's stdin and a private copy of its stdout: a request
``{"args": [...], "env": {...}, "output": path}``, then ``{"pid": N}`` when the child is forked and
``{"returncode": rc}`` when it has exited (negative: killed by that signal).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path


def _preload() -> None:
    """What every run imports or builds before its first task; none of it reads a run's settings."""
    import airflow  # noqa: F401  (configuration and logging of this home)
    import airflow.dag_processing.dagbag  # noqa: F401
    import airflow.models.taskinstance  # noqa: F401
    import airflow.sdk.execution_time.task_runner  # noqa: F401
    import pyspark.sql.connect.session  # noqa: F401
    from airflow.sdk.execution_time import supervisor

    import airflow_ft_provider.operators  # noqa: F401
    from airflow_ft_provider.partitions.s3_models import warm_s3_models

    supervisor.in_process_api_server().app  # noqa: B018  (builds the routes; its transport is per child)
    warm_s3_models()


def _run_child(request: dict, protocol: int) -> None:
    """In the forked child: the run's environment and output file, then the run; never returns."""
    code = 1
    try:
        os.close(protocol)
        out = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.environ.clear()
        os.environ.update(request["env"])
        from ft_harness.airflow.dag_test_runner import main

        main(*request["args"])
        code = 0
    except SystemExit as exit_:  # the exit status Python itself would give
        if exit_.code is None or isinstance(exit_.code, int):
            code = exit_.code or 0
        else:
            print(exit_.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001  (reported in the output, like an uncaught error would be)
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    protocol = os.dup(1)
    os.dup2(2, 1)  # whatever the imports print must not end up in the protocol
    _preload()
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(request, protocol)
        os.write(protocol, (json.dumps({"pid": pid}) + "\n").encode())
        _, status = os.waitpid(pid, 0)
        os.write(protocol, (json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n").encode())


class DagTestForkServer:
    """The client side: one server per environment, started on first use, one run at a time."""

    def __init__(self, env: dict[str, str], cwd: Path, log: Path) -> None:
        self._env, self._cwd, self._log = env, cwd, log
        self._server: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def run(self, args: list[str], env: dict[str, str], output: Path, timeout: float) -> int:
        """Run ``dag_test_runner.main(*args)`` in a fork with ``env``; its exit code (output in ``output``).

        Raises :class:`subprocess.TimeoutExpired` (the child killed) after ``timeout`` seconds.
        """
        with self._lock:
            server = self._started()
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(json.dumps({"args": args, "env": env, "output": str(output)}) + "\n")
            server.stdin.flush()
            pid = self._answer(server)["pid"]
            timed_out = threading.Event()

            def kill() -> None:
                timed_out.set()
                os.kill(pid, signal.SIGKILL)

            timer = threading.Timer(timeout, kill)
            timer.start()
            try:
                answer = self._answer(server)
            finally:
                timer.cancel()
            if timed_out.is_set():
                raise subprocess.TimeoutExpired(args, timeout, output=output.read_text(errors="replace"))
            return answer["returncode"]

    def _answer(self, server: subprocess.Popen) -> dict:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line:
            raise RuntimeError(f"the dag.test fork server exited ({server.wait()}): see {self._log}")
        return json.loads(line)

    def _started(self) -> subprocess.Popen:
        if self._server is None or self._server.poll() is not None:
            with self._log.open("ab") as log:
                self._server = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        "from ft_harness.airflow.dag_test_forkserver import serve; serve()",
                    ],
                    cwd=self._cwd,
                    env=self._env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                )
        return self._server

    def close(self) -> None:
        if self._server is not None and self._server.poll() is None:
            assert self._server.stdin is not None
            self._server.stdin.close()
            try:
                self._server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        self._server = None
