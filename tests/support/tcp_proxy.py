"""A TCP proxy that can play dead: the chaos tests' "S3 endpoint stopped for a few seconds".

Stopping moto itself would lose its in-memory buckets, so clients talk to moto through this proxy;
``outage(seconds)`` closes the listening socket (new connections are refused) and cuts every open
connection, then listens again on the same port. Used in-process (threads), or as a script:

    python -m tests.support.tcp_proxy <listen port> <target host> <target port>
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time


class PausableProxy:
    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._listener = self._listen(port)
        self.port = self._listener.getsockname()[1]
        self.outages = 0
        threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @staticmethod
    def _listen(port: int) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        return listener

    def _accept_loop(self) -> None:
        while True:
            listener = self._listener
            try:
                client, _ = listener.accept()
            except OSError:  # closed for an outage: wait for the new listener
                while self._listener is listener:
                    time.sleep(0.05)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            with self._lock:
                self._connections.difference_update((source, sink))

    def outage(self, seconds: float) -> None:
        """Refuse and cut every connection for ``seconds`` (blocking), then serve again."""
        old = self._listener
        with self._lock:
            connections = list(self._connections)
        old.close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        time.sleep(seconds)
        self._listener = self._listen(self.port)
        self.outages += 1

    def close(self) -> None:
        self._listener.close()


if __name__ == "__main__":
    proxy = PausableProxy(sys.argv[2], int(sys.argv[3]), port=int(sys.argv[1]))
    print(f"proxy {proxy.url} -> {sys.argv[2]}:{sys.argv[3]}", flush=True)
    while True:
        time.sleep(3600)
