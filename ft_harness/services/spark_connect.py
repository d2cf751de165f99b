"""A real Spark Connect server for tests, the demo and benchmarks (pytest plugin and plain class).

Started from the ``pyspark`` package's own jars (``spark-connect_2.13-*.jar`` ships in the wheel)::

    spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer \\
        --master local[2] --conf spark.connect.grpc.binding.port=PORT spark-internal

on a free port, in its own process group, logging to a file; ready once a session can run a query.
``master`` may be a standalone cluster (``spark://host:port``) as well as ``local[N]``.

Fixture ``spark_connect`` (session): a local server; ``connection_env()`` gives the Airflow connection
(type ``spark_connect``) that makes pipeline stages run on it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ft_harness.services.spark_env import SPARK_HOME, spark_environment, start_spark_process

if TYPE_CHECKING:
    from ft_harness.services.spark_host import SparkHost

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SparkConnectServer:
    def __init__(
        self,
        *,
        master: str = "local[2]",
        port: int | None = None,
        log_dir: Path | None = None,
        conf: dict[str, str] | None = None,
        host: SparkHost | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.master = master
        self.env = dict(env or {})  # beside spark_environment(), e.g. PYSPARK_PYTHON
        self.host = host  # None: this machine (a driver sharing the Airflow side's disk)
        self.port = port or _free_port()
        # A log folder of its own (none given) is removed by stop(): nothing is left behind in /tmp.
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="ft-spark-connect-"))
        self.log = self.log_dir / f"spark-connect-{self.port}.log"
        self.conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", **(conf or {})}
        self.process: subprocess.Popen[bytes] | None = None
        self._ready = False

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def connection(self) -> dict[str, object]:
        """The Airflow connection (``AIRFLOW_CONN_...`` JSON) of this server."""
        return {"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": self.port}

    def connection_env(self, conn_id: str = "spark_default") -> dict[str, str]:
        return {f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(self.connection())}

    def start(self, timeout: float = 600) -> SparkConnectServer:
        self.launch()
        self.wait_until_ready(timeout)
        return self

    def launch(self) -> SparkConnectServer:
        """Start the server's process and return at once (``wait_until_ready`` before using it)."""
        command = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--class",
            SERVER_CLASS,
            "--master",
            self.master,
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
        ]
        for key, value in self.conf.items():
            command += ["--conf", f"{key}={value}"]
        command.append("spark-internal")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.process = start_spark_process(
            command, env={**spark_environment(), **self.env}, log=self.log.open("ab"), host=self.host
        )
        self._ready = False
        return self

    def wait_until_ready(self, timeout: float = 600) -> None:
        if self._ready:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
            except OSError:
                time.sleep(0.5)
                continue
            if self._answers():
                self._ready = True
                return
            time.sleep(0.5)
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else "(no log)"
        self._stop_process()  # the log stays, for the error below
        raise RuntimeError(
            f"the Spark Connect server on port {self.port} did not come up in {timeout:.0f} s; "
            f"log {self.log}:\n{tail}"
        )

    def _answers(self) -> bool:
        """A query in a fresh Python (the port opens before the server can serve sessions)."""
        probe = (
            f"from pyspark.sql.connect.session import SparkSession as S; s = S.builder.remote({self.url!r})"
            ".create(); assert s.range(3).count() == 3; s.stop()"
        )
        result = subprocess.run(
            ["python", "-W", "ignore", "-c", probe], env=spark_environment(), capture_output=True, timeout=120
        )
        return result.returncode == 0

    def stop(self) -> None:
        """Stop the server and everything it started (its process group); remove a log folder of its own."""
        self._stop_process()
        if self._own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def _stop_process(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def restart(self, timeout: float = 180) -> None:
        """Lose everything the server held (views, caches) and come back on the same port."""
        self._stop_process()
        self.start(timeout)

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def spark_connect_launched(tmp_path_factory) -> SparkConnectServer:
    """The session's server, possibly still starting: the live Airflow starts alongside it."""
    server = SparkConnectServer(log_dir=tmp_path_factory.mktemp("spark-connect"))
    server.launch()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark_connect(spark_connect_launched) -> SparkConnectServer:
    """A local Spark Connect server (``local[2]``) for the whole test session, ready."""
    spark_connect_launched.wait_until_ready()
    return spark_connect_launched
