"""A TCP proxy that can play dead: the chaos tests' "S3 endpoint stopped for a few seconds".

Stopping moto itself would lose its in-memory buckets, so clients talk to moto through this proxy;
``outage(seconds)`` resets every open and every new connection for that long, then serves again.
Used in-process (threads), or as a script:

    python -m ft_harness.services.tcp_proxy <listen port> <target host> <target port>
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass

# The request line of an HTTP/1.x request, at the start of a chunk a client sends (bodies here are small
# JSON documents, so a request starts a chunk; a body never holds a request line).
_REQUEST_LINE = re.compile(rb"(GET|POST|PUT|PATCH|DELETE|HEAD) (/\S*) HTTP/1\.[01]\r\n")


@dataclass
class HttpRequest:
    """One HTTP request a client sent through the proxy; ``seconds`` until its response began (None: no
    response yet). Responses on a connection come in the order of its requests (HTTP/1.1)."""

    started: float  # time.time()
    method: str
    path: str
    seconds: float | None = None


class PausableProxy:
    """``requests`` lists the HTTP requests clients sent through it (``HttpRequest``): the benchmarks
    count the provider's REST calls and their time with it; ``sent`` and ``received`` count the bytes
    clients sent through it and got back (what a client moved over S3, headers included)."""

    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._down = False
        self._closed = False
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self.outages = 0
        self.requests: list[HttpRequest] = []
        self.sent = self.received = 0
        threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept_loop(self) -> None:
        # One listener for the proxy's life: while "down" it resets every new connection at once
        # (re-binding the port after closing it races with the blocked accept()).
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            if self._down:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._connections.update((client, upstream))
            pending: deque[HttpRequest] = deque()  # this connection's requests awaiting their response
            for a, b, outbound in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pipe, args=(a, b, outbound, pending), daemon=True).start()

    def _pipe(
        self, source: socket.socket, sink: socket.socket, outbound: bool, pending: deque[HttpRequest]
    ) -> None:
        try:
            while data := source.recv(65536):
                if outbound and (line := _REQUEST_LINE.match(data)):
                    request = HttpRequest(time.time(), line[1].decode(), line[2].decode())
                    pending.append(request)
                    self.requests.append(request)
                elif not outbound and data.startswith(b"HTTP/1.") and pending:
                    request = pending.popleft()
                    request.seconds = time.time() - request.started
                with self._lock:
                    if outbound:
                        self.sent += len(data)
                    else:
                        self.received += len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            with self._lock:
                self._connections.difference_update((source, sink))

    def outage(self, seconds: float) -> None:
        """Reset every open and new connection for ``seconds`` (blocking), then serve again."""
        self._down = True
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            _reset(conn)
        time.sleep(seconds)
        self._down = False
        self.outages += 1

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()


def _reset(sock: socket.socket) -> None:
    """Close with an RST, as a dead endpoint's host would answer."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


if __name__ == "__main__":
    proxy = PausableProxy(sys.argv[2], int(sys.argv[3]), port=int(sys.argv[1]))
    print(f"proxy {proxy.url} -> {sys.argv[2]}:{sys.argv[3]}", flush=True)
    while True:
        time.sleep(3600)
