"""The REST client of region failover against a real HTTP(S) server that plays the Airflow API.

It honours https (with the connection's CA bundle), refuses to send the password over plain http to
another machine, times out every call, retries only what is harmless to repeat, and region failover
looks before it sends a clear again whose answer was lost.

    A --a--> B --b--> C          (seed 002, all blocking; C fails, B's partition is lost:
               \\--b--> D          B, C and D restart, so B and D are cleared)
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import tenacity

from airflow_ft_provider.failover import ManualClock
from airflow_ft_provider.hooks.airflow_api import (
    AirflowApiError,
    AirflowApiHook,
    AirflowApiOutcomeUnknown,
    AirflowApiUnreachable,
)
from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output
from airflow_ft_provider.partitions import PartitionNotFound, S3PartitionStore
from airflow_ft_provider.partitions.errors import Unavailable
from airflow_ft_provider.recovery import journal_schema
from airflow_ft_provider.recovery.run_recovery import RunRecovery
from ft_harness.data.journal_records import stored_events

PASSWORD = "svc-password-5f0c1d"


class FakeAirflowApi:
    """/auth/token, a run's task instances and clearTaskInstances, with scripted misbehaviour.

    ``drop``: per "METHOD path" prefix, how many of the next such requests lose their answer (the
    server closes the connection without one), ``apply_before_drop`` whether a dropped clear is applied.
    """

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[tuple[str, str]] = []
        self.raw_paths: list[str] = []  # as sent on the request line, query and percent-encoding kept
        self.clears_applied: list[list[Any]] = []
        self.instances = {
            key: {"task_id": key, "map_index": -1, "state": state, "try_number": 1, "id": str(uuid.uuid4())}
            for key, state in {"A": "success", "B": "success", "C": "failed", "D": "running"}.items()
        }
        self.drop: dict[str, int] = {}
        self.apply_before_drop = True
        self.status: dict[str, int] = {}
        self.hang = False
        self.open_connections = 0
        self.schemes: list[str] = []
        self.accepts: list[str | None] = []
        self.answers: dict[str, Any] = {}  # "METHOD /path" -> a 200 answer in place of the usual one
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: a client that is never closed keeps its socket

            def setup(self) -> None:
                super().setup()
                api.open_connections += 1

            def finish(self) -> None:
                super().finish()
                api.open_connections -= 1

            def _answer(self, status: int, doc: Any) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                path = self.path.split("?")[0]
                name = f"{self.command} {path}"
                api.requests.append((self.command, path))
                api.raw_paths.append(self.path)
                api.schemes.append("https" if isinstance(self.connection, ssl.SSLSocket) else "http")
                api.accepts.append(self.headers.get("Accept"))
                if api.hang:
                    time.sleep(3)
                if path == "/auth/token":
                    ok = body == {"username": "svc", "password": PASSWORD}
                    return self._answer(
                        201 if ok else 401, {"access_token": "t0k"} if ok else {"detail": "no"}
                    )
                if self.headers.get("Authorization") != "Bearer t0k":
                    return self._answer(401, {"detail": "not authenticated"})
                drop = next((k for k in api.drop if name.startswith(k) and api.drop[k] > 0), None)
                if path.endswith("/clearTaskInstances") and (drop is None or api.apply_before_drop):
                    api.clears_applied.append(body["task_ids"])
                    for task in body["task_ids"]:
                        api.instances[task]["id"] = str(
                            uuid.uuid4()
                        )  # as Airflow: a cleared TI gets a new id
                if drop is not None:
                    api.drop[drop] -= 1
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return None
                if (status := api.status.get(name)) is not None:
                    return self._answer(status, {"detail": "database is locked"})
                if name in api.answers:
                    return self._answer(200, api.answers[name])
                if path.endswith("/clearTaskInstances"):
                    return self._answer(
                        200,
                        {
                            "task_instances": [api.instances[t] for t in body["task_ids"]],
                            "total_entries": len(body["task_ids"]),
                        },
                    )
                listing = list(api.instances.values())
                return self._answer(200, {"task_instances": listing, "total_entries": len(listing)})

            do_GET = do_POST = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_api() -> Iterator[FakeAirflowApi]:
    api = FakeAirflowApi()
    yield api
    api.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1: (its PEM as a CA bundle, the server's TLS context)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return folder / "cert.pem", context


@pytest.fixture
def no_waits(monkeypatch):
    """tenacity's waits off: the tests count requests, they need not wait for the backoff."""
    import airflow_ft_provider.recovery.clearing as clearing

    monkeypatch.setattr(AirflowApiHook._request.retry, "wait", tenacity.wait_none())
    monkeypatch.setattr(clearing, "CLEAR_WAIT", tenacity.wait_none())


def connection(monkeypatch, conn_id: str, uri: str | None = None, **fields: Any) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", uri or json.dumps(fields))
    return conn_id


# -- the connection: scheme, TLS verification, plain http ----------------------------------------
def test_an_https_uri_is_used_with_https_and_the_ca_bundle_of_its_extra(monkeypatch, certificate):
    ca_bundle, server_tls = certificate
    api = FakeAirflowApi(tls=server_tls)
    try:
        conn_id = connection(
            monkeypatch,
            "ft_api_https",
            f"https://svc:{PASSWORD}@127.0.0.1:{api.port}?verify={quote(str(ca_bundle), safe='')}",
        )
        with AirflowApiHook(conn_id, timeout=5) as hook:
            assert hook.server.base_url == f"https://127.0.0.1:{api.port}"
            assert {t["task_id"] for t in hook.task_instances("seed002", "r1")} == {"A", "B", "C", "D"}
        assert api.schemes == ["https", "https"]  # the login went over TLS, never in clear text
    finally:
        api.close()


def test_a_certificate_that_is_not_trusted_is_refused_by_default(monkeypatch, certificate, no_waits):
    _, server_tls = certificate
    api = FakeAirflowApi(tls=server_tls)
    try:
        conn_id = connection(
            monkeypatch,
            "ft_api_untrusted",
            conn_type="http",
            host="127.0.0.1",
            port=api.port,
            schema="https",
            login="svc",
            password=PASSWORD,
        )
        with AirflowApiHook(conn_id, timeout=5) as hook, pytest.raises(AirflowApiUnreachable) as refused:
            hook.task_instances("seed002", "r1")
        assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
        assert api.requests == []  # the password was never sent
        # verify=false (explicit) accepts it, with a warning in the log
        conn_id = connection(
            monkeypatch,
            "ft_api_unverified",
            conn_type="http",
            host="127.0.0.1",
            port=api.port,
            schema="https",
            login="svc",
            password=PASSWORD,
            extra={"verify": False},
        )
        with AirflowApiHook(conn_id, timeout=5) as hook:
            assert len(hook.task_instances("seed002", "r1")) == 4
    finally:
        api.close()


@pytest.mark.parametrize(
    ("fields", "base_url"),
    [
        ({"host": "127.0.0.1", "port": 8080}, "http://127.0.0.1:8080"),
        ({"host": "localhost", "port": 8080, "schema": "http"}, "http://localhost:8080"),
        ({"host": "::1", "port": 8080}, "http://[::1]:8080"),
        (
            {"host": "airflow-api", "port": 8080, "extra": {"allow_insecure_http": True}},
            "http://airflow-api:8080",
        ),
        ({"host": "airflow-api", "port": 8443, "schema": "https"}, "https://airflow-api:8443"),
        ({"host": "https://airflow.example.com/internal/"}, "https://airflow.example.com/internal"),
    ],
    ids=["loopback", "localhost", "ipv6-loopback", "allowed-explicitly", "https-schema", "url-as-host"],
)
def test_where_the_hook_connects(monkeypatch, fields, base_url):
    conn_id = connection(
        monkeypatch, "ft_api_where", conn_type="http", login="svc", password=PASSWORD, **fields
    )
    assert AirflowApiHook(conn_id).server.base_url == base_url


def test_the_password_is_never_sent_over_plain_http_to_another_machine(monkeypatch):
    conn_id = connection(monkeypatch, "ft_api_remote", f"http://svc:{PASSWORD}@airflow-api.internal:8080")
    with pytest.raises(
        ValueError, match="would send the password of 'svc' in clear text over http"
    ) as refused:
        AirflowApiHook(conn_id).task_instances("seed002", "r1")
    assert PASSWORD not in str(refused.value) and "allow_insecure_http" in str(refused.value)
    assert PASSWORD not in repr(
        AirflowApiHook(connection(monkeypatch, "ft_api_ok", f"https://svc:{PASSWORD}@h")).server
    )


@pytest.mark.parametrize("run_id", ["manual__a?b#c", "scheduled__x/y%2F z&limit=1"])
def test_every_path_segment_is_percent_encoded(monkeypatch, fake_api, run_id):
    """A run id with '?', '#', '/', '%' or a space names that run: before, '?' started a query and '#' a
    fragment, so the request addressed another resource (the DAG's runs listing, or a shorter run id)."""
    from urllib.parse import unquote

    conn_id = connection(monkeypatch, "ft_api_encoded", f"http://svc:{PASSWORD}@127.0.0.1:{fake_api.port}")
    fake_api.instances = {"B?#": {**fake_api.instances["B"], "task_id": "B?#"}}
    with AirflowApiHook(conn_id, timeout=5) as hook:
        hook.task_instances("seed002", run_id)
        hook.try_state("seed002", run_id, "B?#", 3, 2)
        hook.clear("seed002", run_id, [("B?#", -1)])
    listing, one_try, clear = [p for p in fake_api.raw_paths if p != "/auth/token"]
    encoded = quote(run_id, safe="")
    assert listing == f"/api/v2/dags/seed002/dagRuns/{encoded}/taskInstances?limit=100&offset=0"
    assert one_try == f"/api/v2/dags/seed002/dagRuns/{encoded}/taskInstances/B%3F%23/3/tries/2"
    assert clear == "/api/v2/dags/seed002/clearTaskInstances"
    assert [unquote(segment) for segment in one_try.split("/")[4:9]] == [
        "seed002",
        "dagRuns",
        run_id,
        "taskInstances",
        "B?#",
    ]


def test_a_callers_headers_go_with_the_token(monkeypatch, fake_api):
    conn_id = connection(monkeypatch, "ft_api_headers", f"http://svc:{PASSWORD}@127.0.0.1:{fake_api.port}")
    with AirflowApiHook(conn_id, timeout=5) as hook:
        answer = hook.request("GET", "/api/v2/anything", headers={"Accept": "application/json"})
    assert isinstance(answer, dict) and answer["total_entries"] == 4  # authenticated: the token went too
    assert fake_api.accepts[-1] == "application/json"


def test_an_answer_that_is_not_a_page_of_instances_is_an_api_error(monkeypatch, fake_api):
    conn_id = connection(monkeypatch, "ft_api_bad_page", f"http://svc:{PASSWORD}@127.0.0.1:{fake_api.port}")
    fake_api.answers["GET /api/v2/dags/seed002/dagRuns/r1/taskInstances"] = {"task_instances": ["B"]}
    with AirflowApiHook(conn_id, timeout=5) as hook, pytest.raises(AirflowApiError, match="not a page of"):
        hook.task_instances("seed002", "r1")


def test_a_clear_answered_without_its_instances_may_have_happened(monkeypatch, fake_api):
    """The clear was applied (Airflow answered 200): the caller must look before it clears again."""
    conn_id = connection(monkeypatch, "ft_api_bad_clear", f"http://svc:{PASSWORD}@127.0.0.1:{fake_api.port}")
    fake_api.answers["POST /api/v2/dags/seed002/clearTaskInstances"] = {"total_entries": 1}
    with AirflowApiHook(conn_id, timeout=5) as hook, pytest.raises(AirflowApiOutcomeUnknown):
        hook.clear("seed002", "r1", [("B", -1)])
    assert fake_api.clears_applied == [["B"]]


def test_a_try_airflow_has_no_record_of_is_one_that_never_started(monkeypatch, fake_api):
    """While the API server is down a worker cannot start a try; Airflow fails it and keeps no record of
    it (the tries endpoint answers 404). Any other refusal is still an error."""
    conn_id = connection(monkeypatch, "ft_api_no_try", f"http://svc:{PASSWORD}@127.0.0.1:{fake_api.port}")
    tries = "GET /api/v2/dags/seed002/dagRuns/r1/taskInstances/A/tries/"
    fake_api.status[tries + "5"] = 404
    fake_api.status[tries + "6"] = 403
    with AirflowApiHook(conn_id, timeout=5) as hook:
        assert hook.try_state("seed002", "r1", "A", -1, 5) is None
        with pytest.raises(AirflowApiError, match="answered 403"):
            hook.try_state("seed002", "r1", "A", -1, 6)


# -- timeouts and retries -------------------------------------------------------------------------
def test_every_call_has_a_timeout(monkeypatch, fake_api, no_waits):
    fake_api.hang = True
    conn_id = connection(monkeypatch, "ft_api_slow", f"http://svc:{PASSWORD}@127.0.0.1:{fake_api.port}")
    started = time.monotonic()
    with (
        AirflowApiHook(conn_id, timeout=0.3) as hook,
        pytest.raises(AirflowApiUnreachable, match="timed out"),
    ):
        hook.task_instances("seed002", "r1")
    assert time.monotonic() - started < 10  # 6 tries of a 0.3 s timeout, not 6 * 3 s


def test_a_read_whose_answer_is_lost_is_repeated(monkeypatch, fake_api, no_waits):
    fake_api.drop = {"GET /api/v2/dags/seed002/dagRuns/r1/taskInstances": 2}
    fake_api.status = {}
    conn_id = connection(monkeypatch, "ft_api_reads", f"http://svc:{PASSWORD}@127.0.0.1:{fake_api.port}")
    with AirflowApiHook(conn_id, timeout=5) as hook:
        assert len(hook.task_instances("seed002", "r1")) == 4
    assert fake_api.requests.count(("GET", "/api/v2/dags/seed002/dagRuns/r1/taskInstances")) == 3


@pytest.mark.parametrize("failure", ["lost answer", "503"])
def test_a_clear_is_sent_once_even_when_its_answer_is_lost(monkeypatch, fake_api, no_waits, failure):
    clear = "POST /api/v2/dags/seed002/clearTaskInstances"
    if failure == "lost answer":
        fake_api.drop = {clear: 5}
    else:
        fake_api.status = {clear: 503}
    conn_id = connection(monkeypatch, "ft_api_clear", f"http://svc:{PASSWORD}@127.0.0.1:{fake_api.port}")
    with AirflowApiHook(conn_id, timeout=5) as hook, pytest.raises(AirflowApiOutcomeUnknown):
        hook.clear("seed002", "r1", [("D", -1)])
    assert fake_api.requests.count(("POST", "/api/v2/dags/seed002/clearTaskInstances")) == 1
    assert fake_api.clears_applied == [["D"]]


# -- region failover: a lost clear, masked causes, no lingering sockets --------------------------
FIXED = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 5,
    "restart-strategy.fixed-delay.delay": "2 s",
}


@pytest.fixture
def seed002(s3_bucket, monkeypatch, fake_api):
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/")
    connection(monkeypatch, "ft_api_failover", f"http://svc:{PASSWORD}@127.0.0.1:{fake_api.port}")
    description = PipelineDescription(
        "seed002",
        [
            StageDeclaration("A", 1, (), (Output("a"),)),
            StageDeclaration("B", 1, (Input("a"),), (Output("b"),)),
            StageDeclaration("C", 1, (Input("b"),), (Output("c"),)),
            StageDeclaration("D", 1, (Input("b"),), (Output("d"),)),
        ],
        restart_config=FIXED,
        airflow_api_conn_id="ft_api_failover",
    )
    return RunRecovery(description, "r1", store, clock=ManualClock(1000.0))


def lost_b():
    return PartitionNotFound("b", Unavailable.MISSING_OBJECT)


@pytest.mark.s3
@pytest.mark.parametrize("applied", [True, False], ids=["applied-before-the-answer-was-lost", "not-applied"])
def test_failover_looks_before_it_sends_a_lost_clear_again(seed002, fake_api, no_waits, applied):
    fake_api.drop = {"POST /api/v2/dags/seed002/clearTaskInstances": 1}
    fake_api.apply_before_drop = applied
    decision = seed002.handle_failure("C", None, 1, lost_b())
    assert decision.tasks == {"B", "C", "D"}
    # Exactly one clear took effect either way: B's and D's running tries are stopped once, not twice.
    assert fake_api.clears_applied == [["B", "D"]]
    sent = fake_api.requests.count(("POST", "/api/v2/dags/seed002/clearTaskInstances"))
    assert sent == (1 if applied else 2)
    [event] = stored_events(seed002.journal)
    assert event["cleared"] == ["B", "D"]


@pytest.mark.s3
def test_failover_closes_the_client_it_made(seed002, fake_api):
    seed002.handle_failure("C", None, 1, lost_b())
    assert fake_api.clears_applied == [["B", "D"]]
    deadline = time.monotonic() + 5
    while fake_api.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake_api.open_connections == 0  # the failover object is still alive; its sockets are not


@pytest.mark.s3
def test_a_cause_is_recorded_with_the_secrets_airflow_masks(seed002):
    from airflow.sdk.log import mask_secret

    secret = "aws-secret-" + uuid.uuid4().hex
    mask_secret(secret)
    seed002.handle_failure("C", None, 1, RuntimeError(f"S3 said no to key {secret} (signature mismatch)"))
    [event] = stored_events(seed002.journal)
    assert secret not in json.dumps(event) and "***" in event["cause"]
    assert secret not in journal_schema.encode(seed002.journal.load()).decode()


def test_where_the_api_is_goes_to_the_task_log_only_when_a_connection_said_it(monkeypatch, capfd):
    """A task's log says which server its clears go to; a tool that gave the server itself (the demo,
    dev mode) prints no stray log line."""
    from airflow_ft_provider.hooks.airflow_api import ApiServer

    conn_id = connection(
        monkeypatch,
        "ft_api_logged",
        conn_type="http",
        host="127.0.0.1",
        port=8080,
        login="svc",
        password=PASSWORD,
    )
    given = ApiServer("http://127.0.0.1:8080", "admin", "admin", True)
    AirflowApiHook("(given: http://127.0.0.1:8080)", server=given)._http.close()
    assert "Airflow REST API at" not in "".join(capfd.readouterr())
    AirflowApiHook(conn_id)._http.close()
    assert "Airflow REST API at http://127.0.0.1:8080 (connection 'ft_api_logged')" in "".join(
        capfd.readouterr()
    )
