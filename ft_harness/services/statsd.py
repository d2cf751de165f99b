"""A real StatsD endpoint for tests: a UDP socket that keeps every metric line it receives.

The session's live Airflow sends its metrics here (``[metrics] statsd_on``, with InfluxDB-style tags so
that a test can tell its own DAG's lines apart); ``lines(prefix)`` returns what arrived so far.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Metric:
    """One StatsD line: ``name,tag=value,...:value|type``."""

    name: str
    tags: dict[str, str]
    value: float
    kind: str  # c, ms, g

    @classmethod
    def parse(cls, line: str) -> Metric | None:
        head, sep, rest = line.rpartition(":")
        value, _, kind = rest.partition("|")
        if not sep or not kind:
            return None
        name, *pairs = head.split(",")
        tags = dict(p.split("=", 1) for p in pairs if "=" in p)
        try:
            return cls(name, tags, float(value), kind.split("|")[0])
        except ValueError:
            return None


class StatsdListener:
    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # UDP drops what does not fit the receive buffer: room for bursts while a loaded machine (the
        # whole suite on 2 cores) leaves this thread waiting (the kernel caps it at net.core.rmem_max).
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._receive, name="statsd-listener", daemon=True)
        self._thread.start()

    def environment(self, prefix: str = "airflow") -> dict[str, str]:
        """What Airflow's components need to send their metrics here."""
        return {
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(self.port),
            "AIRFLOW__METRICS__STATSD_PREFIX": prefix,
            "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
        }

    def _receive(self) -> None:
        while not self._closed:
            try:
                data = self.socket.recv(65535)
            except OSError:
                return
            with self._lock:  # a datagram may carry several lines (a StatsD pipeline)
                self._lines.extend(line for line in data.decode("utf-8", "replace").splitlines() if line)

    def metrics(self, prefix: str = "") -> list[Metric]:
        with self._lock:
            lines = list(self._lines)
        parsed = (Metric.parse(line) for line in lines)
        return [m for m in parsed if m is not None and m.name.startswith(prefix)]

    def wait_for(self, predicate, timeout: float = 30.0) -> list[Metric]:
        """The metrics once ``predicate(metrics)`` holds; after ``timeout``, AssertionError."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.metrics()
            if predicate(found):
                return found
            if time.monotonic() > deadline:
                names = sorted({m.name for m in found if ".ft." in m.name or m.name.startswith("ft.")})
                raise AssertionError(
                    f"the StatsD listener did not receive what was expected; ft metrics: {names}"
                )
            time.sleep(0.2)

    def close(self) -> None:
        self._closed = True
        self.socket.close()


@pytest.fixture(scope="session")
def statsd_listener():
    listener = StatsdListener()
    yield listener
    listener.close()
