"""How a call to the Airflow REST API can fail, and which failures are worth trying again: an outage
(unreachable, or an answer lost) versus a refusal that trying again will not change (a 4xx)."""

from __future__ import annotations

from urllib.parse import quote

import httpx


class AirflowApiError(RuntimeError):
    """The REST API refused or failed a request; the message has the method, path and status."""

    def __init__(self, method: str, path: str, status: int, detail: str, *, retryable: bool = False) -> None:
        super().__init__(f"Airflow REST API {method} {path} answered {status}: {detail[:500]}")
        self.status = status
        self.retryable = retryable


class AirflowApiUnreachable(ConnectionError):
    """The API server of the ``airflow_api`` connection did not answer (after retries)."""


class AirflowApiOutcomeUnknown(RuntimeError):
    """A request that must not be repeated blindly (a clear) reached the server, but its answer was lost
    (connection dropped, timeout, 5xx): it may or may not have been applied. Read the state to learn which."""


def api_path(*segments: str | int) -> str:
    """``/api/v2/<segment>/...`` with every segment percent-encoded: a run id such as ``a?b#c`` (Airflow
    allows it when ``[scheduler] allowed_run_id_pattern`` is widened) must name that run, not start a
    query or a fragment, and a ``/`` in an id must not add a path level."""
    return "/api/v2/" + "/".join(quote(str(segment), safe="") for segment in segments)


def api_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the API server could not be reached or answer (an outage, after retries),
    as opposed to a refusal that trying again later will not change (a 4xx)."""
    if isinstance(exc, AirflowApiUnreachable | AirflowApiOutcomeUnknown):
        return True
    return isinstance(exc, AirflowApiError) and exc.retryable


def retryable(exc: BaseException) -> bool:
    # A request that never left (no connection) is harmless to repeat, whatever its method.
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        return True
    return isinstance(exc, httpx.TransportError | AirflowApiError) and getattr(exc, "retryable", False)


class RetryableTransportError(httpx.TransportError):
    """A transport error of an idempotent request (marked so that tenacity retries it)."""

    retryable = True
