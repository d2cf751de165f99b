"""Real Spark for tests: the pip ``pyspark`` distribution in local mode, and a standalone cluster.

``spark_env`` makes ``spark-submit`` of the virtual environment runnable (PATH, SPARK_HOME, the
driver's Python). ``spark_standalone_cluster`` starts a Spark master and one worker on 127.0.0.1 with
``spark-class`` (the pip package ships no sbin/ scripts) and yields a ``StandaloneCluster`` (master
URL, web UI, worker work dir, logs); ``spark_standalone`` is just its master URL.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SPARK_HOME = Path(__import__("pyspark").__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_environment() -> dict[str, str]:
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["SPARK_HOME"] = str(SPARK_HOME)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Test stages are seconds long: the C1 compiler and the serial collector cut the client JVM's
    # CPU time by ~40% on 2 cores (see README, Benchmarks). Production jobs keep Spark's defaults.
    env.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    return env


@pytest.fixture(scope="session")
def spark_env():
    """Apply the Spark environment to this process (the operator's spark-submit inherits it)."""
    saved = dict(os.environ)
    os.environ.update(spark_environment())
    yield os.environ
    os.environ.clear()
    os.environ.update(saved)


def _wait_for_log(path: Path, needle: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.5)
    raise RuntimeError(f"Spark did not log {needle!r} within {timeout:.0f} s; see {path}:\n"
                       + (path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"))


@dataclass(frozen=True)
class StandaloneCluster:
    url: str  # spark://127.0.0.1:PORT
    master_web_ui: str  # http://127.0.0.1:PORT (GET /json/ lists applications)
    work_dir: Path  # the worker's SPARK_WORKER_DIR: one app-* directory per application it ran
    master_log: Path
    worker_log: Path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


@pytest.fixture(scope="session")
def spark_standalone(spark_standalone_cluster):
    """The master URL (spark://127.0.0.1:PORT) of the session's standalone cluster."""
    return spark_standalone_cluster.url


@pytest.fixture(scope="session")
def spark_standalone_cluster(tmp_path_factory, spark_env):
    """A Spark standalone master + one worker (1 core, 1 GiB) on 127.0.0.1."""
    logs = tmp_path_factory.mktemp("spark-standalone")
    env = spark_environment()
    env["SPARK_WORKER_DIR"] = str(logs / "work")
    port = _free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    processes: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = logs / f"{name}.log"
        process = subprocess.Popen(
            [spark_class, *args], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
        )
        processes.append(process)
        return process, log

    try:
        web_ui_port = _free_port()
        master, master_log = start(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web_ui_port),
        )
        _wait_for_log(master_log, "I have been elected leader", master, 120)
        url = f"spark://127.0.0.1:{port}"
        worker, worker_log = start(
            "worker", "org.apache.spark.deploy.worker.Worker", url,
            "--host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
        )
        _wait_for_log(worker_log, "Successfully registered with master", worker, 120)
        yield StandaloneCluster(url, f"http://127.0.0.1:{web_ui_port}", Path(env["SPARK_WORKER_DIR"]),
                                master_log, worker_log)
    finally:
        for process in processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
