"""An HTTP proxy in front of an S3 endpoint that drops request headers: "an S3-compatible store that
accepts If-Match / If-None-Match and ignores them".

The client signs its requests (SigV4) for the proxy; removing a signed header breaks that signature,
so the proxy signs each request again for the target with the credentials it is given (over plain
HTTP botocore signs the whole payload, so no streaming signatures are involved). The target sees
valid requests without the conditions, exactly what a store that ignores them does with them.
"""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

CONDITIONS = ("If-Match", "If-None-Match")
# Recomputed by the signer or by http.client, or meaningless hop-by-hop.
_NOT_FORWARDED = {
    "authorization",
    "x-amz-date",
    "x-amz-content-sha256",
    "host",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "expect",
}
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class HeaderStrippingProxy:
    """Forward to ``target_url``, minus the ``strip`` headers, signed again as ``access_key``."""

    def __init__(
        self,
        target_url: str,
        *,
        access_key: str,
        secret_key: str,
        region: str = "us-east-1",
        strip: tuple[str, ...] = CONDITIONS,
        port: int = 0,
    ) -> None:
        target = urlsplit(target_url)
        self.target_url = target_url.rstrip("/")
        self.stripped: Counter[str] = Counter()  # header name -> how many requests lost it
        proxy = self
        drop = {h.lower() for h in strip}

        class Forward(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                from botocore.auth import S3SigV4Auth
                from botocore.awsrequest import AWSRequest
                from botocore.credentials import Credentials

                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {}
                for name, value in self.headers.items():
                    if name.lower() in drop:
                        proxy.stripped[name] += 1
                    elif name.lower() not in _NOT_FORWARDED:
                        headers[name] = value
                request = AWSRequest(self.command, proxy.target_url + self.path, data=body, headers=headers)
                S3SigV4Auth(Credentials(access_key, secret_key), "s3", region).add_auth(request)
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=dict(request.headers.items()))
                    response = conn.getresponse()
                    data = response.read()
                finally:
                    conn.close()
                self.send_response_only(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() not in _HOP_BY_HOP:
                        self.send_header(name, value)
                length = response.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Forward)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="header-proxy", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
