"""Real Spark for tests: the pip ``pyspark`` distribution in local mode, and a standalone cluster.

:class:`SparkStandalone` starts a Spark master and N workers on 127.0.0.1 with
``spark-class`` (the pip package ships no sbin/ scripts); the fixture ``spark_standalone_cluster`` is
one with a single worker and yields a ``StandaloneCluster`` (master URL, web UI, work dir, logs);
``spark_standalone`` is just its master URL.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ft_harness.services.spark_env import FAST_JVM, SPARK_HOME, spark_environment, start_spark_process

if TYPE_CHECKING:
    from ft_harness.services.spark_host import SparkHost


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_log(path: Path, needle: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.5)
    raise RuntimeError(
        f"Spark did not log {needle!r} within {timeout:.0f} s; see {path}:\n"
        + (path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)")
    )


def _kill_group(process: subprocess.Popen) -> list[int]:
    """SIGKILL a Spark daemon's process group (it and what it started); the pids killed."""
    listed = subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True, text=True).stdout
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    return [int(pid) for pid in listed.split()]


@dataclass(frozen=True)
class StandaloneCluster:
    url: str  # spark://127.0.0.1:PORT
    master_web_ui: str  # http://127.0.0.1:PORT (GET /json/ lists applications)
    work_dir: Path  # the workers' SPARK_WORKER_DIR: one app-* directory per application an executor ran
    master_log: Path
    worker_logs: tuple[Path, ...]
    worker_dir: str = ""  # SPARK_WORKER_DIR as the Spark host sees it (its executors' /proc/PID/cwd)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def worker_log(self) -> Path:
        return self.worker_logs[0]


class SparkStandalone:
    """A Spark standalone master and ``workers`` workers (``cores`` and ``memory`` each) on 127.0.0.1,
    started with ``spark-class`` (the pip package ships no sbin/ scripts), each in its own process group;
    ``stop()`` ends them all."""

    def __init__(
        self,
        folder: Path,
        *,
        workers: int = 1,
        cores: int = 1,
        memory: str = "1g",
        host: SparkHost | None = None,
        recovery: bool = False,
    ) -> None:
        self.folder = Path(folder)  # logs (on this side; the work directory is on the Spark host)
        self.workers, self.cores, self.memory = workers, cores, memory
        self.host = host  # None: this machine, sharing its disk
        # The master's single-node recovery (Spark's FILESYSTEM mode, its state in a directory of the
        # master's host): a master started again takes back the workers and the running applications.
        self.recovery = recovery
        self._master: subprocess.Popen | None = None
        self._master_args: list[str] = []
        self.processes: list[subprocess.Popen] = []
        self.cluster: StandaloneCluster | None = None
        self._env: dict[str, str] = {}
        self._url = ""  # the master's, once started
        self._workers: dict[int, subprocess.Popen] = {}  # worker number -> its process, while it runs

    def _start(self, env: dict[str, str], name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = self.folder / f"{name}.log"
        command = [str(SPARK_HOME / "bin" / "spark-class"), *args]
        process = start_spark_process(command, env=env, log=log.open("w"), host=self.host)
        self.processes.append(process)
        return process, log

    def start(self) -> StandaloneCluster:
        self.folder.mkdir(parents=True, exist_ok=True)
        env = spark_environment()
        # On a Spark host of its own the work directory is in its private /tmp (read through host.path)
        # (one of its own per cluster: several may share a host)
        in_host = f"/tmp/spark-work-{os.getpid()}-{time.monotonic_ns()}"
        env["SPARK_WORKER_DIR"] = str(self.folder / "work") if self.host is None else in_host
        # The daemons and the executors the workers launch (they inherit the worker's environment and
        # are not started by spark-submit) get the test JVM settings of spark_environment() too.
        env["JAVA_TOOL_OPTIONS"] = FAST_JVM
        port, web_ui_port = _free_port(), _free_port()
        if self.recovery:
            recovery_dir = f"{in_host}-recovery" if self.host else str(self.folder / "recovery")
            env["SPARK_MASTER_OPTS"] = (
                f"-Dspark.deploy.recoveryMode=FILESYSTEM -Dspark.deploy.recoveryDirectory={recovery_dir}"
            )
        self._master_args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web_ui_port)]
        try:
            self._env = env
            master, master_log = self._launch_master("master")
            _wait_for_log(master_log, "I have been elected leader", master, 600)
            url = f"spark://127.0.0.1:{port}"
            self._url = url
            started = [self._launch_worker(n, f"worker-{n}") for n in range(1, self.workers + 1)]
            for worker, log in started:
                _wait_for_log(log, "Successfully registered with master", worker, 600)
        except BaseException:
            self.stop()
            raise
        self.cluster = StandaloneCluster(
            url,
            f"http://127.0.0.1:{web_ui_port}",
            self.host.path(env["SPARK_WORKER_DIR"]) if self.host else Path(env["SPARK_WORKER_DIR"]),
            master_log,
            tuple(log for _, log in started),
            env["SPARK_WORKER_DIR"],
        )
        return self.cluster

    def _launch_master(self, name: str) -> tuple[subprocess.Popen, Path]:
        process, log = self._start(
            self._env, name, "org.apache.spark.deploy.master.Master", *self._master_args
        )
        self._master = process
        return process, log

    def kill_master(self) -> list[int]:
        """SIGKILL the master (its machine lost); workers, executors and drivers keep running."""
        assert self._master is not None, "the master is not running"
        killed = _kill_group(self._master)
        self._master = None
        return killed

    def start_master(self, timeout: float = 300) -> None:
        """The master again (after ``kill_master``), on its port; with ``recovery``, once it has taken
        back the workers and applications it knew (Spark logs "Recovery complete")."""
        process, log = self._launch_master(f"master-{time.monotonic_ns()}")
        _wait_for_log(
            log, "Recovery complete" if self.recovery else "I have been elected leader", process, timeout
        )

    def _launch_worker(self, number: int, name: str) -> tuple[subprocess.Popen, Path]:
        process, log = self._start(
            self._env,
            name,
            "org.apache.spark.deploy.worker.Worker",
            self._url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--webui-port",
            str(_free_port()),
        )
        self._workers[number] = process
        return process, log

    def kill_worker(self, number: int) -> list[int]:
        """SIGKILL worker ``number`` with everything it started (its executors and their Python
        workers share its process group): a Spark machine lost. The processes killed."""
        return _kill_group(self._workers.pop(number))

    def workers_with_executors(self) -> list[int]:
        """The running workers (numbers) that hold an executor now."""
        return [
            number
            for number, process in sorted(self._workers.items())
            if subprocess.run(
                ["pgrep", "-g", str(process.pid), "-f", "CoarseGrainedExecutorBackend"],
                capture_output=True,
                text=True,
            ).stdout.split()
        ]

    def start_worker(self, number: int, timeout: float = 300) -> None:
        """Worker ``number`` again (after ``kill_worker``), registered with the master."""
        process, log = self._launch_worker(number, f"worker-{number}-{time.monotonic_ns()}")
        _wait_for_log(log, "Successfully registered with master", process, timeout)

    def stop(self) -> None:
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self.processes.clear()


@pytest.fixture(scope="session")
def spark_standalone(spark_standalone_cluster):
    """The master URL (spark://127.0.0.1:PORT) of the session's standalone cluster."""
    return spark_standalone_cluster.url


@pytest.fixture(scope="session")
def spark_standalone_cluster(tmp_path_factory, spark_env):
    """A Spark standalone master + one worker (1 core, 1 GiB) on 127.0.0.1."""
    standalone = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield standalone.start()
    finally:
        standalone.stop()
