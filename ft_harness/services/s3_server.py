"""An S3 endpoint for tests: moto in server mode (real HTTP, real SigV4 auth), or one you point at.

Fixtures:
- ``s3_endpoint`` (session): endpoint URL, region and valid credentials.
- ``s3_bucket`` (function): a fresh, empty bucket (or a fresh prefix in ``FT_TEST_S3_BUCKET``).

By default a ``moto`` server is started as a subprocess on a free local port with authentication
on (``INITIAL_NO_AUTH_ACTION_COUNT``): an IAM user and access key are created first, and from then on
wrong keys are refused like on AWS. Moto's conditional PutObject (If-Match / If-None-Match) checks and
writes in two steps; the server process wraps it in a lock so that it is atomic, as on S3.

To run against another S3-compatible endpoint instead, set:
- ``FT_TEST_S3_ENDPOINT``     e.g. ``http://127.0.0.1:9000``
- ``FT_TEST_S3_ACCESS_KEY`` / ``FT_TEST_S3_SECRET_KEY``
- ``FT_TEST_S3_REGION``       (default ``us-east-1``)
- ``FT_TEST_S3_BUCKET``       optional: use this existing bucket with a fresh prefix per test
                              instead of creating a bucket per test.
The endpoint must support conditional writes (AWS S3 does since 2024).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
_ALLOW_ALL = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}'
# IAM calls made before auth is enforced: CreateUser, CreateAccessKey, PutUserPolicy.
_BOOTSTRAP_ACTIONS = 3


@dataclass(frozen=True)
class S3Endpoint:
    url: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"
    shared_bucket: str | None = None
    process: Any = None

    def client(self, **overrides: Any) -> Any:
        import boto3
        from botocore.config import Config

        kwargs: dict[str, Any] = {
            "endpoint_url": self.url,
            "region_name": self.region,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "config": Config(
                retries={"total_max_attempts": 2, "mode": "standard"},
                connect_timeout=5,
                read_timeout=60,
                max_pool_connections=16,
            ),
        }
        kwargs.update(overrides)
        return boto3.client("s3", **kwargs)

    def aws_connection(self) -> str:
        """This endpoint as an Airflow ``aws`` connection (JSON for ``AIRFLOW_CONN_<ID>``)."""
        extra = {"endpoint_url": self.url, "region_name": self.region}
        return json.dumps(
            {"conn_type": "aws", "login": self.access_key, "password": self.secret_key, "extra": extra}
        )

    def env(self) -> dict[str, str]:
        """For child processes (see ft_harness/runners/commit_child.py)."""
        return {
            "FT_CHILD_S3_ENDPOINT": self.url,
            "FT_CHILD_S3_ACCESS_KEY": self.access_key,
            "FT_CHILD_S3_SECRET_KEY": self.secret_key,
            "FT_CHILD_S3_REGION": self.region,
        }


@dataclass(frozen=True)
class S3Bucket:
    endpoint: S3Endpoint
    name: str
    prefix: str  # "" or "some/prefix/"

    @property
    def url(self) -> str:
        return f"s3://{self.name}/{self.prefix}"

    def client(self, **overrides: Any) -> Any:
        return self.endpoint.client(**overrides)

    def keys(self, prefix: str = "") -> dict[str, int]:
        """Every object under the bucket's test prefix (+ ``prefix``), key -> size."""
        client = self.client()
        out = {}
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=self.name, Prefix=self.prefix + prefix
        ):
            for obj in page.get("Contents", ()):
                out[obj["Key"]] = obj["Size"]
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _patch_moto_conditional_put() -> None:
    """Make moto's check-then-write of a conditional PutObject atomic, as it is on S3."""
    from moto.s3.responses import S3Response

    lock = threading.Lock()
    original = S3Response.put_object

    def put_object(self: Any) -> Any:
        if self.headers.get("If-Match") or self.headers.get("If-None-Match"):
            with lock:
                return original(self)
        return original(self)

    S3Response.put_object = put_object  # type: ignore[method-assign]


def start_moto_server(*, auth: bool = True, timeout: float = 120.0) -> S3Endpoint:
    """Start ``python -m ft_harness.services.s3_server`` (moto) and return its endpoint with valid keys.

    ``timeout`` is generous: the low-priority test session starts its server while the live-Airflow
    session keeps both cores busy, and on a slow machine importing moto then takes tens of seconds."""
    import boto3

    port = free_port()
    env = dict(os.environ)
    if auth:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(_BOOTSTRAP_ACTIONS)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "ft_harness.services.s3_server", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(REPO_ROOT),
    )
    deadline = time.monotonic() + timeout
    while True:  # a TCP connect, not an HTTP request: requests count towards the no-auth budget
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(
                    f"moto server did not start on port {port} (exit code {process.poll()})"
                ) from None
            time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    access_key, secret_key = "bootstrap", "bootstrap"
    if auth:
        iam = boto3.client(
            "iam",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="bootstrap",
            aws_secret_access_key="bootstrap",
        )
        iam.create_user(UserName="ft-tests")
        key = iam.create_access_key(UserName="ft-tests")["AccessKey"]
        iam.put_user_policy(UserName="ft-tests", PolicyName="all", PolicyDocument=_ALLOW_ALL)
        access_key, secret_key = key["AccessKeyId"], key["SecretAccessKey"]
    return S3Endpoint(url, access_key, secret_key, process=process)


def stop_moto_server(endpoint: S3Endpoint) -> None:
    if endpoint.process is not None:
        endpoint.process.terminate()
        try:
            endpoint.process.wait(10)
        except subprocess.TimeoutExpired:
            endpoint.process.kill()
            endpoint.process.wait()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    if os.environ.get("FT_TEST_S3_ENDPOINT"):
        yield S3Endpoint(
            os.environ["FT_TEST_S3_ENDPOINT"],
            os.environ["FT_TEST_S3_ACCESS_KEY"],
            os.environ["FT_TEST_S3_SECRET_KEY"],
            os.environ.get("FT_TEST_S3_REGION", "us-east-1"),
            shared_bucket=os.environ.get("FT_TEST_S3_BUCKET") or None,
        )
        return
    endpoint = start_moto_server()
    try:
        yield endpoint
    finally:
        stop_moto_server(endpoint)


@pytest.fixture
def s3_bucket(s3_endpoint: S3Endpoint) -> Iterator[S3Bucket]:
    client = s3_endpoint.client()
    if s3_endpoint.shared_bucket:
        bucket = S3Bucket(s3_endpoint, s3_endpoint.shared_bucket, f"ft-test-{uuid.uuid4().hex[:12]}/")
    else:
        bucket = S3Bucket(s3_endpoint, f"ft-test-{uuid.uuid4().hex[:12]}", "")
        client.create_bucket(Bucket=bucket.name)
    try:
        yield bucket
    finally:
        with contextlib.suppress(Exception):
            keys = list(bucket.keys())
            for start in range(0, len(keys), 1000):
                client.delete_objects(
                    Bucket=bucket.name,
                    Delete={"Objects": [{"Key": k} for k in keys[start : start + 1000]], "Quiet": True},
                )
            pages = client.get_paginator("list_multipart_uploads").paginate(
                Bucket=bucket.name, Prefix=bucket.prefix
            )
            for upload in [u for page in pages for u in page.get("Uploads", ())]:
                client.abort_multipart_upload(
                    Bucket=bucket.name, Key=upload["Key"], UploadId=upload["UploadId"]
                )
            if not s3_endpoint.shared_bucket:
                client.delete_bucket(Bucket=bucket.name)


def _decode_chunked_bodies_in_linear_time() -> None:
    """Moto decodes an ``aws-chunked`` body (what pyarrow's S3 client sends: the executors' writes) by
    appending each chunk to a ``bytes`` it copies every time: quadratic in the part's size, and 30 %
    of the server's CPU while executors wrote 150 MB (py-spy). Same result, one join."""
    from moto.s3.responses import S3Response

    def _handle_encoded_body(self: Any, body: Any) -> bytes:
        if not body:
            return b""
        if isinstance(body, bytes):
            body = io.BytesIO(body)
        chunks = []
        size = int(body.readline().strip(), 16)  # each chunk: "<hex size>\r\n<bytes>\r\n"
        while size > 0:
            chunks.append(body.read(size))
            body.readline()
            size = int(body.readline().strip(), 16)
        return b"".join(chunks)  # then the trailer (its checksum), unread, as moto leaves it

    S3Response._handle_encoded_body = _handle_encoded_body  # type: ignore[method-assign]


def _list_moto_modules_once() -> None:
    """Moto's dispatcher lists its package folder (~150 ``isdir`` calls) on every request to find the
    service a host names: a fifth of the server's CPU (py-spy). The folder does not change."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules  # type: ignore[assignment]


def main(argv: list[str]) -> None:
    """Run the patched moto server in this process: ``python -m ft_harness.services.s3_server PORT``."""
    _patch_moto_conditional_put()
    _list_moto_modules_once()
    _decode_chunked_bodies_in_linear_time()
    from moto.server import main as moto_main

    moto_main(["-H", "127.0.0.1", "-p", argv[0]])


if __name__ == "__main__":
    main(sys.argv[1:])
