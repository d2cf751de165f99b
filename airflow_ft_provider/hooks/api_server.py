"""Where the Airflow REST API is and as whom (what the hook reads from its connection), and the rules
for reading the connection's flags and telling a loopback host from one across a network."""

from __future__ import annotations

import ipaddress
import os
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from airflow_ft_provider.task_log import TaskLog

if TYPE_CHECKING:
    from airflow.sdk import Connection

TRUE = {"true", "1", "yes", "on"}
FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class ApiServer:
    """Where and as whom: what the hook reads from the connection (``repr`` shows no password)."""

    base_url: str
    login: str
    password: str
    verify: bool | ssl.SSLContext

    def __repr__(self) -> str:
        return f"ApiServer({self.base_url!r}, login={self.login!r})"


def parse_flag(value: object, *, what: str) -> bool | None:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
        return value.strip().lower() in TRUE
    if what:
        raise ValueError(f"{what} must be true or false, got {value!r}")
    return None


def is_loopback(host: str) -> bool:
    try:
        return (
            host.lower() in ("localhost", "localhost.") or ipaddress.ip_address(host.strip("[]")).is_loopback
        )
    except ValueError:
        return False


def api_server(conn: Connection, conn_id: str, log: TaskLog) -> ApiServer:
    """The API server a connection names, refusing what would leak its password or cannot work."""
    if not conn.host or not conn.login:
        raise ValueError(
            f"connection {conn_id!r} needs host and login/password of the Airflow API "
            "server (e.g. AIRFLOW_CONN_AIRFLOW_API='http://admin:secret@localhost:8080'); region "
            "failover uses it to restart tasks of the failed region's neighbours"
        )
    extra = conn.extra_dejson or {}
    if "://" in conn.host:  # host given as a whole URL
        url = httpx.URL(conn.host)
        scheme, host, port, path = url.scheme, url.host, conn.port or url.port, url.path
    else:
        schema = (conn.schema or "").strip("/")
        if schema.lower() in ("http", "https"):
            scheme, path = schema.lower(), ""
        else:  # an https:// URI gives conn_type "https"; a URI's path arrives as the schema
            scheme, path = ("https" if conn.conn_type == "https" else "http"), schema
        host, port = conn.host, conn.port
    if scheme not in ("http", "https"):
        raise ValueError(f"connection {conn_id!r}: scheme {scheme!r} is not http or https")
    allow_http = parse_flag(
        extra.get("allow_insecure_http", False), what=f"connection {conn_id!r} extra allow_insecure_http"
    )
    if scheme == "http" and not is_loopback(host) and not allow_http:
        raise ValueError(
            f"connection {conn_id!r} would send the password of {conn.login!r} in clear text over "
            f"http to {host!r}, which is not a loopback address; use https "
            f"(e.g. AIRFLOW_CONN_{conn_id.upper()}="
            f"'https://<user>:<password>@{host}:<port>') or, on a private network you trust, set the "
            "extra "
            '{"allow_insecure_http": true}'
        )
    netloc = f"[{host}]" if ":" in host and not host.startswith("[") else host
    base = f"{scheme}://{netloc}{f':{port}' if port else ''}/{path.strip('/')}".rstrip("/")
    return ApiServer(
        base, conn.login, conn.password or "", _verification(extra.get("verify", True), conn_id, log)
    )


def _verification(value: object, conn_id: str, log: TaskLog) -> bool | ssl.SSLContext:
    """``verify`` of the extra: on (default), off, or a CA bundle (file or directory)."""
    flag = parse_flag(value, what="")
    if flag is True:
        return True
    if flag is False:
        log.warning(
            "TLS certificate verification is off for connection %r: anyone on the network "
            "path can impersonate the API server",
            conn_id,
        )
        return False
    path = os.path.expanduser(str(value))
    if not os.path.exists(path):
        raise ValueError(
            f"connection {conn_id!r}: extra verify={value!r} is neither true/false "
            "nor an existing CA bundle (file or directory); give the path of the PEM file that signed "
            "the API server's certificate"
        )
    if os.path.isdir(path):
        return ssl.create_default_context(capath=path)
    return ssl.create_default_context(cafile=path)
