"""Where the Airflow REST API is and as whom (what the hook reads from its connection), and the rules
for reading the connection's flags and telling a loopback host from one across a network."""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass

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
