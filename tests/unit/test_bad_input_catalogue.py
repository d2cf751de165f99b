"""Catalogue of what users get wrong: one table, one row per mistake (issue "Fault and bad-input suite").

Every row makes one mistake the way a user makes it (a DAG file, a connection, a setting, a name, an
object in the bucket) and asserts
  * the exact error type (``type(err) is X``, not a subclass),
  * that the message contains the listed words: the offending key/value and the fix,
  * that no secret appears in the message,
  * that nothing was written or deleted: the bucket's objects (key + ETag) and multipart uploads, the
    list of buckets, the files under the test's tmp dir and the requests the (fake) Airflow API got
    besides logins are the same before and after.

Categories (the first part of every row id):

    restart-strategy    invalid value of every restart-strategy key, unknown type, misspelt key
    checkpoint          invalid value of every checkpoint tuning key (stage, pipeline, airflow.cfg), Flink
                        keys with no meaning here (unaligned, at-least-once, concurrent checkpoints)
    failover-strategy   unknown jobmanager.execution.failover-strategy
    wiring              miswired partitions, misuse of FailoverPipeline, bad result names in a DAG
    s3-connection       undefined connection, wrong type, wrong keys, unreachable endpoint, no such
                        bucket -- each tried with a commit (write), a release (delete) and a fetch
    s3-endpoint         an S3-compatible endpoint that ignores If-None-Match / If-Match
    store-config        bad [ft_provider] settings and store URLs
    airflow-api         undefined or incomplete airflow_api connection, wrong login, unreachable,
                        plain http to another machine, a verify that is no CA bundle
    spark               undefined spark connection
    faults              a run's ft_faults naming a task or partition the pipeline lacks, or a bad 'times'
                        or 'batch'
    name                pipeline/run/result/consumer/execution/attempt/file names with '..', '/',
                        control characters, overlong names, bad bucket names and map indexes,
                        file names another writer uploaded that readers would reject
    manifest            not JSON, hostile JSON (deep nesting, huge integers, NaN, duplicate keys),
                        wrong shape, oversized, files outside the attempt (also through the local
                        cache), a file that is also a directory, another partition's manifest

Rows whose message could be clearer are marked with a comment starting ``GAP:``.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

from airflow_ft_provider.hooks.airflow_api import AirflowApiError, AirflowApiUnreachable
from airflow_ft_provider.model.description import PipelineWiringError
from airflow_ft_provider.operators.spark_stage import SparkConnectionMissing
from airflow_ft_provider.partitions import (
    PartitionNotFound,
    PartitionRef,
    PartitionStoreError,
    Producer,
    RunRef,
    S3PartitionStore,
)
from airflow_ft_provider.partitions.conditional import ConditionalWritesUnsupported
from ft_harness.data.partition_files import RUN_ID, version_files, write_files
from ft_harness.services.header_proxy import HeaderStrippingProxy
from ft_harness.services.s3_server import S3Endpoint, free_port

pytestmark = pytest.mark.s3

SEEDED = PartitionRef("etl", RUN_ID, "orders", 0)  # committed once per module; must survive every row
PLANTED = PartitionRef("etl", RUN_ID, "planted", 0)  # where the manifest rows put their bad manifest
WRONG_SECRET = "wrong-secret-0123456789abcdef"
WRONG_API_PASSWORD = "not-the-api-password"
CLOSED_PORT = free_port()  # nothing listens here
IGNORING_PORT = free_port()  # an endpoint that ignores conditional writes, while a row needs it
UPLOADED = PartitionRef("etl", RUN_ID, "uploaded", 0)  # where another writer's files go
MISSING_BUCKET = "ft-catalogue-no-such-bucket"


# ------------------------------------------------------------------------------------------------
# A row, and what its functions get
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    provoke: Callable[[Env], object]
    error: type[BaseException]
    says: tuple[str, ...]
    setup: Callable[[Env], None] | None = None  # runs before the "before" snapshot


def row(
    id: str,
    provoke: Callable[[Env], object],
    error: type[BaseException],
    *says: str,
    setup: Callable[[Env], None] | None = None,
) -> Any:
    return pytest.param(Case(provoke, error, says, setup), id=id)


@dataclass
class Env:
    s3: S3Endpoint
    bucket: str
    prefix: str  # the catalogue's prefix in the bucket ("" unless FT_TEST_S3_BUCKET is shared)
    client: Any  # boto3 S3 client with the right keys
    store: S3PartitionStore  # a working store
    tmp: Path
    monkeypatch: pytest.MonkeyPatch
    api: FakeAirflowApi
    source: Path = field(init=False)  # files to commit
    dest: Path = field(init=False)  # where fetches go; a failed fetch must not even create it

    def __post_init__(self) -> None:
        self.source = write_files(self.tmp / "src", version_files(2, count=2, size=100))
        self.dest = self.tmp / "dest"

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}catalogue/"

    def set_conn(self, conn_id: str, **fields: Any) -> str:
        self.monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))
        return conn_id

    def aws_conn(
        self,
        conn_id: str,
        *,
        login: str | None = None,
        password: str | None = None,
        endpoint_url: str | None = None,
    ) -> str:
        return self.set_conn(
            conn_id,
            conn_type="aws",
            login=login or self.s3.access_key,
            password=password or self.s3.secret_key,
            extra={
                "endpoint_url": endpoint_url or self.s3.url,
                "region_name": self.s3.region,
                "config_kwargs": {"retries": {"total_max_attempts": 1}, "connect_timeout": 2},
            },
        )


def snapshot(env: Env) -> dict[str, Any]:
    """Everything a bad input could have changed."""
    paginate = env.client.get_paginator
    return {
        "objects": {
            obj["Key"]: obj["ETag"]
            for page in paginate("list_objects_v2").paginate(Bucket=env.bucket, Prefix=env.prefix)
            for obj in page.get("Contents", ())
        },
        "multipart uploads": sorted(
            (upload["Key"], upload["UploadId"])
            for page in paginate("list_multipart_uploads").paginate(Bucket=env.bucket, Prefix=env.prefix)
            for upload in page.get("Uploads", ())
        ),
        "buckets": sorted(b["Name"] for b in env.client.list_buckets()["Buckets"]),
        "local files": sorted(str(p.relative_to(env.tmp)) for p in env.tmp.rglob("*")),
        "airflow api requests": [r for r in env.api.requests if r != ("POST", "/auth/token")],
    }


# ------------------------------------------------------------------------------------------------
# Fixtures: one seeded bucket per module, a fake Airflow API server that refuses every login
# ------------------------------------------------------------------------------------------------
class FakeAirflowApi:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        api = self

        class Refuse(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                api.requests.append((self.command, self.path))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = b'{"detail": "Invalid username or password"}'
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def fake_airflow_api() -> Iterator[FakeAirflowApi]:
    api = FakeAirflowApi()
    yield api
    api.server.shutdown()
    api.server.server_close()


@pytest.fixture(scope="module")
def catalogue_bucket(
    s3_endpoint: S3Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Any]]:
    client = s3_endpoint.client()
    if s3_endpoint.shared_bucket:
        bucket, prefix = s3_endpoint.shared_bucket, f"ft-catalogue-{uuid.uuid4().hex[:12]}/"
    else:
        bucket, prefix = f"ft-catalogue-{uuid.uuid4().hex[:12]}", ""
        client.create_bucket(Bucket=bucket)
    source = write_files(tmp_path_factory.mktemp("seed"), version_files(1, count=2, size=100))
    S3PartitionStore(client, f"s3://{bucket}/{prefix}catalogue/").commit(
        SEEDED, source, producer=Producer("extract", 0, 1)
    )
    yield bucket, prefix, client
    keys = [
        obj["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for obj in page.get("Contents", ())
    ]
    for start in range(0, len(keys), 1000):
        client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[start : start + 1000]]}
        )
    if not s3_endpoint.shared_bucket:
        client.delete_bucket(Bucket=bucket)


@pytest.fixture
def env(s3_endpoint, catalogue_bucket, fake_airflow_api, tmp_path, monkeypatch) -> Env:
    bucket, prefix, client = catalogue_bucket
    store = S3PartitionStore(client, f"s3://{bucket}/{prefix}catalogue/")
    return Env(s3_endpoint, bucket, prefix, client, store, tmp_path, monkeypatch, fake_airflow_api)


# ------------------------------------------------------------------------------------------------
# How users make the mistakes
# ------------------------------------------------------------------------------------------------
# -- DAG files ----------------------------------------------------------------------------------
def stage(task_id: str, **kwargs: Any) -> Any:
    from airflow_ft_provider.operators.spark_stage import SparkStageOperator

    return SparkStageOperator(task_id=task_id, application=f"jobs/{task_id}.py", **kwargs)


def one_stage() -> None:
    stage("a")


def dag_file(build: Callable[[], object] = one_stage, **pipeline_kwargs: Any) -> Callable[[Env], object]:
    """``with DAG(...): with FailoverPipeline(store=<the bucket>, **pipeline_kwargs): build()``."""

    def provoke(env: Env) -> None:
        from airflow_ft_provider.pipeline import FailoverPipeline

        kwargs = {"store": env.url + "parsed/", **pipeline_kwargs}
        with DAG(f"catalogue_{uuid.uuid4().hex[:10]}", schedule=None):
            with FailoverPipeline(**kwargs):
                build()

    return provoke


def restart(option: str, value: object, requirement: str, *says: str) -> Any:
    """``restart-strategy.<option>: value`` under its own strategy type, in a DAG file."""
    key = f"restart-strategy.{option}"
    config = {"restart-strategy.type": option.split(".")[0], key: value}
    return row(
        f"restart-strategy/{option}={value!r}",
        dag_file(restart_strategy=config),
        PipelineWiringError,
        key,
        f"got {value!r}",
        f"must be {requirement}",
        f"set it to {requirement}",
        *says,
    )


def checkpointing(key: str, value: object, *says: str, where: str = "stage") -> Any:
    """``checkpointing={key: value}`` on a stage (or as the pipeline's default), in a DAG file."""
    if where == "stage":
        provoke = dag_file(lambda: stage("a", checkpointing={key: value}))
    else:
        provoke = dag_file(checkpointing={key: value})
    return row(f"checkpoint/{where}:{key}={value!r}", provoke, PipelineWiringError, key, repr(value), *says)


def checkpoint_in_airflow_cfg(env: Env) -> None:
    """A bad cluster-wide checkpoint key in [ft_provider], checked when a checkpointed stage is parsed."""
    from airflow.sdk import conf

    conf.set("ft_provider", "execution.checkpointing.interval", "often")
    try:
        dag_file(lambda: stage("a", checkpointing=True))(env)
    finally:
        conf.remove_option("ft_provider", "execution.checkpointing.interval")


def restart_strategy_in_airflow_cfg(env: Env) -> None:
    """README: cluster-wide defaults live in [ft_provider] of airflow.cfg, checked when the DAG is parsed."""
    from airflow.sdk import conf

    conf.set("ft_provider", "restart-strategy.type", "bogus")
    try:
        dag_file()(env)
    finally:
        conf.remove_option("ft_provider", "restart-strategy.type")


def sized_by(config: dict[str, object], *, inputs: object = ("raw",)) -> Callable[[], object]:
    """``score`` expands over ``auto_parallelism(config)`` and reads ``inputs`` of ``extract``."""

    def build() -> None:
        from airflow_ft_provider.operators.auto_parallelism import auto_parallelism
        from airflow_ft_provider.operators.spark_stage import SparkStageOperator

        stage("extract", outputs=["raw"] if inputs == ("raw",) else {"raw": "pipelined"})
        SparkStageOperator.partial(task_id="score", application="jobs/score.py", inputs=["raw"]).expand(
            application_args=auto_parallelism(config)
        )

    return build


def pipeline_outside_dag(env: Env) -> None:
    from airflow_ft_provider.pipeline import FailoverPipeline

    with FailoverPipeline(store=env.url):
        stage("a")


def two_pipelines_in_one_dag(env: Env) -> None:
    from airflow_ft_provider.pipeline import FailoverPipeline

    with DAG(f"catalogue_{uuid.uuid4().hex[:10]}", schedule=None):
        with FailoverPipeline(store=env.url):
            stage("a")
        with FailoverPipeline(store=env.url):
            stage("b")


def dag_with_id(dag_id: str) -> Callable[[Env], object]:
    """A pipeline DAG whose id Airflow accepts but the partition store cannot use."""

    def provoke(env: Env) -> None:
        from airflow_ft_provider.pipeline import FailoverPipeline

        with DAG(dag_id, schedule=None):
            with FailoverPipeline(store=env.url + "parsed/"):
                one_stage()

    return provoke


def dag_with_default_args(**default_args: Any) -> Callable[[Env], object]:
    """``with DAG(..., default_args=...)``: default_args reach every task, the pipeline's stages too."""

    def provoke(env: Env) -> None:
        from airflow_ft_provider.pipeline import FailoverPipeline

        with DAG(f"catalogue_{uuid.uuid4().hex[:10]}", schedule=None, default_args=default_args):
            with FailoverPipeline(store=env.url + "parsed/"):
                one_stage()

    return provoke


def mapped_stage_with_retries() -> None:
    from airflow_ft_provider.operators.spark_stage import SparkStageOperator

    SparkStageOperator.partial(task_id="m", application="m.py", retries=5).expand(
        application_args=[["x"], ["y"]]
    )


# -- S3 connections -----------------------------------------------------------------------------
def hook_store(env: Env, conn_id: str | None, url: str | None = None) -> S3PartitionStore:
    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    return PartitionStoreHook(conn_id, url=url or env.url).get_store()


def without_aws_credentials(env: Env) -> str:
    """No aws_default connection and nothing in boto3's standard chain (env, files, instance role)."""
    for name in list(os.environ):
        if name.startswith("AWS_") and name != "AWS_CA_BUNDLE":
            env.monkeypatch.delenv(name)
    env.monkeypatch.delenv("AIRFLOW_CONN_AWS_DEFAULT", raising=False)
    env.monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(env.tmp / "no-credentials"))
    env.monkeypatch.setenv("AWS_CONFIG_FILE", str(env.tmp / "no-config"))
    env.monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return "aws_default"


STORE_OPERATIONS: dict[str, Callable[[S3PartitionStore, Env], object]] = {
    "commit": lambda store, env: store.commit(SEEDED, env.source, producer=Producer("extract", 0, 2)),
    "release": lambda store, env: store.release_run(SEEDED.pipeline, SEEDED.run_id),
    "fetch": lambda store, env: store.fetch(SEEDED, env.dest),
}

# problem -> (configure: env -> (aws_conn_id, store URL or None), error, words of the message)
S3_CONNECTION_PROBLEMS: dict[str, tuple[Callable[[Env], tuple[str, str | None]], type, tuple[str, ...]]] = {
    "wrong-secret-key": (
        lambda env: (env.aws_conn("ft_s3_wrong_secret", password=WRONG_SECRET), None),
        PartitionStoreError,
        ("SignatureDoesNotMatch", "check the secret key of the AWS connection 'ft_s3_wrong_secret'"),
    ),
    "unknown-access-key": (
        lambda env: (
            env.aws_conn("ft_s3_wrong_key", login="AKIAWRONGWRONGWRONG1", password=WRONG_SECRET),
            None,
        ),
        PartitionStoreError,
        ("InvalidAccessKeyId", "check the access key of the AWS connection 'ft_s3_wrong_key'"),
    ),
    "unreachable-endpoint": (
        lambda env: (env.aws_conn("ft_s3_unreachable", endpoint_url=f"http://127.0.0.1:{CLOSED_PORT}"), None),
        PartitionStoreError,
        (
            "EndpointConnectionError",
            f"http://127.0.0.1:{CLOSED_PORT}",
            "check endpoint_url in the extra of the AWS connection 'ft_s3_unreachable'",
        ),
    ),
    "nonexistent-bucket": (
        lambda env: (env.aws_conn("ft_s3_ok"), f"s3://{MISSING_BUCKET}/p/"),
        PartitionStoreError,
        ("NoSuchBucket", f"s3://{MISSING_BUCKET}", "create the bucket or fix the bucket"),
    ),
    "undefined-connection": (
        lambda env: ("ft_s3_never_defined", None),
        AirflowNotFoundException,
        (
            "connection 'ft_s3_never_defined' is not defined",
            "AIRFLOW_CONN_FT_S3_NEVER_DEFINED",
            "aws_conn_id='aws_default'",
        ),
    ),
    "connection-of-type-http": (
        lambda env: (env.set_conn("ft_s3_http", conn_type="http", host="example.com"), None),
        ValueError,
        ("'ft_s3_http'", "has type 'http'", "needs an 'aws' connection", "login = access key id"),
    ),
    "aws_default-undefined-and-no-standard-chain": (
        lambda env: (without_aws_credentials(env), None),
        PartitionStoreError,
        (
            "NoCredentialsError",
            "set login/password on the AWS connection 'aws_default' or configure the standard AWS chain",
        ),
    ),
}


def s3_connection_rows() -> list[Any]:
    rows = []
    for problem, (configure, error, says) in S3_CONNECTION_PROBLEMS.items():
        for operation, run in STORE_OPERATIONS.items():

            def provoke(env: Env, configure=configure, run=run) -> object:
                conn_id, url = configure(env)
                return run(hook_store(env, conn_id, url), env)

            rows.append(row(f"s3-connection/{problem}/{operation}", provoke, error, *says))
    return rows


def through_an_endpoint_ignoring_conditions(
    operation: Callable[[S3PartitionStore, Env], object],
) -> Callable[[Env], object]:
    """The store reached through an S3-compatible endpoint that accepts If-None-Match / If-Match and
    ignores them: a proxy in front of the test endpoint that drops both headers."""

    def provoke(env: Env) -> object:
        proxy = HeaderStrippingProxy(
            env.s3.url,
            access_key=env.s3.access_key,
            secret_key=env.s3.secret_key,
            region=env.s3.region,
            port=IGNORING_PORT,
        )
        try:
            return operation(hook_store(env, env.aws_conn("ft_s3_ignoring", endpoint_url=proxy.url)), env)
        finally:
            proxy.close()

    return provoke


def journal_update(store: S3PartitionStore, env: Env) -> object:
    from airflow_ft_provider.recovery.journal import RecoveryJournal

    return RecoveryJournal(store, SEEDED.run).update(lambda state: None)


def setting(name: str, value: str) -> Callable[[Env], object]:
    """``[ft_provider] <name> = <value>``, then the partition store is built from a good connection."""

    def provoke(env: Env) -> object:
        env.monkeypatch.setenv(f"AIRFLOW__FT_PROVIDER__{name.upper()}", value)
        return hook_store(env, env.aws_conn("ft_s3_ok"))

    return provoke


def stage_try_setting(name: str, value: str) -> Callable[[Env], object]:
    """``[ft_provider] <name> = <value>``, then a stage try reads the settings it starts with."""

    def provoke(env: Env) -> object:
        from airflow_ft_provider.stage_try.adoption import wait_for_running_work

        env.monkeypatch.setenv(f"AIRFLOW__FT_PROVIDER__{name.upper()}", value)
        return wait_for_running_work()

    return provoke


def executor_setting(name: str, value: str) -> Callable[[Env], object]:
    """``[ft_provider] <name> = <value>``, then a try on the executors' data path asks how they reach
    the store."""

    def provoke(env: Env) -> object:
        from airflow_ft_provider.hooks.partition_store import executor_access

        env.monkeypatch.setenv(f"AIRFLOW__FT_PROVIDER__{name.upper()}", value)
        return executor_access(hook_store(env, env.aws_conn("ft_s3_ok")), "ft_s3_ok")

    return provoke


def parsed_with_setting(name: str, value: str) -> Callable[[Env], object]:
    """``[ft_provider] <name> = <value>``, then a DAG file whose pipeline leaves it to the deployment."""

    def provoke(env: Env) -> object:
        env.monkeypatch.setenv(f"AIRFLOW__FT_PROVIDER__{name.upper()}", value)
        return dag_file()(env)

    return provoke


def sweep_setting(name: str, value: str) -> Callable[[Env], object]:
    """``[ft_provider] <name> = <value>``, then a run's end asks for the sweep's limits."""

    def provoke(env: Env) -> object:
        from airflow_ft_provider.hooks.partition_store import sweep_limits

        env.monkeypatch.setenv(f"AIRFLOW__FT_PROVIDER__{name.upper()}", value)
        return sweep_limits()

    return provoke


def cache_setting(name: str, value: str) -> Callable[[Env], object]:
    """A task-local cache directory with ``[ft_provider] <name> = <value>``, then the store is built."""

    def provoke(env: Env) -> object:
        env.monkeypatch.setenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_CACHE_DIR", str(env.tmp / "cache"))
        env.monkeypatch.setenv(f"AIRFLOW__FT_PROVIDER__{name.upper()}", value)
        return hook_store(env, env.aws_conn("ft_s3_ok"))

    return provoke


def cluster_store_connection(env: Env) -> object:
    """``[ft_provider] partition_store_conn_id`` names a connection nobody defined; a pipeline that names
    none (and airflow-ft without --aws-conn-id) builds its store with it."""
    from airflow_ft_provider.pipeline import cluster_store_conn_id

    env.monkeypatch.setenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_CONN_ID", "ft_cluster_store_never_defined")
    return hook_store(env, cluster_store_conn_id()).fetch(SEEDED, env.dest)


def store_without_url(env: Env) -> object:
    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    env.monkeypatch.delenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL", raising=False)
    return PartitionStoreHook(env.aws_conn("ft_s3_ok")).get_store()


# -- Airflow REST API and Spark -----------------------------------------------------------------
def clear_through_api(conn_id: str, **conn_fields: Any) -> Callable[[Env], object]:
    """Region failover clearing a task through the ``conn_id`` connection (defined only if fields given)."""

    def provoke(env: Env) -> object:
        from airflow_ft_provider.hooks.airflow_api import AirflowApiHook

        if conn_fields:
            fields = {k: env.api.port if v == "<fake api port>" else v for k, v in conn_fields.items()}
            env.set_conn(conn_id, conn_type="http", **fields)
        # The hook retries transport errors 6 times with exponential backoff; no waiting here.
        import tenacity

        env.monkeypatch.setattr(AirflowApiHook._request.retry, "wait", tenacity.wait_none())
        return AirflowApiHook(conn_id, timeout=5).clear("etl", RUN_ID, [("extract", 0)])

    return provoke


def spark_submit_with_undefined_connection(env: Env) -> object:
    from airflow_ft_provider.operators.spark_stage import SparkStageOperator

    return SparkStageOperator(task_id="s", application="s.py").spark_hook(conn_id="ft_spark_never_defined")


def faults_in_run_conf(faults: object) -> Callable[[Env], object]:
    """A run's conf asking for faults on a deployment that allows injection (a stage try's first step).

    extract[0..1] --orders--> report"""

    def provoke(env: Env) -> object:
        import logging
        from types import SimpleNamespace

        from airflow_ft_provider.faults.injection import injector_for
        from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration
        from airflow_ft_provider.model.exchanges import Input, Output

        env.monkeypatch.setenv("AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION", "True")
        graph = PipelineDescription(
            "etl",
            [
                StageDeclaration("extract", 2, (), (Output("orders"),), mapped=True),
                StageDeclaration("report", 1, (Input("orders"),), ()),
            ],
        ).graph
        context = {
            "dag_run": SimpleNamespace(conf={"ft_faults": faults}),
            "params": {},
            "ti": SimpleNamespace(try_number=1),
        }
        return injector_for(
            context,
            "report",
            graph=graph,
            store=env.store,
            run=RunRef("etl", RUN_ID),
            log=logging.getLogger("ft.catalogue"),
        )

    return provoke


# -- names --------------------------------------------------------------------------------------
def commit(ref: Callable[[], PartitionRef]) -> Callable[[Env], object]:
    return lambda env: env.store.commit(ref(), env.source, producer=Producer("extract", 0, 1))


def source_with_file(file_name: str) -> Callable[[Env], None]:
    def setup(env: Env) -> None:
        env.source = write_files(env.tmp / "odd-src", {file_name: b"x"})

    return setup


def uploaded(name: str, attempt_id: str) -> tuple[Callable[[Env], None], Callable[[Env], object]]:
    """(setup, provoke): another writer (Spark with s3a) put a good file and ``name`` under an attempt
    of UPLOADED; the producer then commits what it uploaded."""

    def setup(env: Env) -> None:
        prefix = env.store.attempt_location(UPLOADED, attempt_id).removeprefix(f"s3://{env.bucket}/")
        for key, data in (("part-0.parquet", b"ok"), (name, b"bad")):
            env.client.put_object(Bucket=env.bucket, Key=prefix + key, Body=data)

    def provoke(env: Env) -> object:
        return env.store.commit_uploaded(UPLOADED, attempt_id, producer=Producer("extract", 0, 1))

    return setup, provoke


def uploaded_file_row(id: str, name: str, attempt_id: str) -> Any:
    setup, provoke = uploaded(name, attempt_id)
    return row(
        id,
        provoke,
        ValueError,
        "cannot publish s3://",
        f"{attempt_id}/{name}",
        f"invalid file name {name!r}",
        "Readers would reject the partition",
        "make the writer name its files that way",
        setup=setup,
    )


# -- manifests ----------------------------------------------------------------------------------
def manifest(**changes: Any) -> Callable[[Env], dict[str, Any]]:
    """The seeded (valid) manifest, moved to PLANTED, with ``changes``: ``key=``, ``partition__key=``
    or ``file0__key=`` (the first file entry)."""

    def build(env: Env) -> dict[str, Any]:
        doc = json.loads(env.store.manifest(SEEDED).to_json())
        doc["partition"]["result"] = PLANTED.result
        for path, value in changes.items():
            part, _, key = path.partition("__")
            target = {"partition": doc["partition"], "file0": doc["files"][0]}.get(part, doc)
            target[key or part] = value(doc) if callable(value) else value
        return doc

    return build


def plant(content: bytes | Callable[[Env], Any]) -> Callable[[Env], None]:
    """Put ``content`` (bytes, or a JSON document built from the env) where PLANTED's manifest goes."""

    def setup(env: Env) -> None:
        data = content if isinstance(content, bytes) else json.dumps(content(env)).encode()
        key = env.store.layout.partition_prefix(PLANTED) + "manifest.json"
        env.client.put_object(Bucket=env.bucket, Key=key, Body=data)

    return setup


def fetch_planted(env: Env) -> object:
    return env.store.fetch(PLANTED, env.dest)


def commit_planted(env: Env) -> object:
    return env.store.commit(PLANTED, env.source, producer=Producer("extract", 0, 2))


def bad_manifest(name: str, content: bytes | Callable[[Env], Any], *says: str) -> Any:
    return row(
        f"manifest/{name}",
        fetch_planted,
        PartitionNotFound,
        "partition 'planted[0]'",
        "invalid manifest",
        *says,
        setup=plant(content),
    )


def first_key_plus(suffix: str) -> Callable[[dict[str, Any]], str]:
    return lambda doc: doc["files"][0]["key"] + suffix


def fetch_planted_through_cache(env: Env) -> object:
    """A worker with a local partition cache (task-local recovery) reading PLANTED."""
    return S3PartitionStore(env.client, env.url, cache=env.tmp / "cache").fetch(PLANTED)


def cached_bad_manifest(name: str, content: Callable[[Env], Any], *says: str) -> Any:
    return row(
        f"manifest/{name}/through-the-cache",
        fetch_planted_through_cache,
        PartitionNotFound,
        "partition 'planted[0]'",
        "invalid manifest",
        *says,
        setup=plant(content),
    )


def also_a_directory(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The files plus one inside the first file's name, as if it were a directory."""
    first = doc["files"][0]
    return [*doc["files"], {**first, "key": first["key"] + "/inner.bin"}]


DEEP = b"[" * 100_000 + b"]" * 100_000


OVERSIZED = b'{"schema_version": 1, "padding": "' + b"x" * (1 << 20) + b'"}'  # 1 048 612 bytes


# ------------------------------------------------------------------------------------------------
# The catalogue
# ------------------------------------------------------------------------------------------------
CATALOGUE = [
    # -- restart-strategy ---------------------------------------------------------------------------
    row(
        "restart-strategy/type=typo",
        dag_file(restart_strategy={"restart-strategy.type": "fixd-delay"}),
        PipelineWiringError,  # a ValueError, as every other setting's
        "restart-strategy.type",
        "'fixd-delay'",
        "did you mean 'fixed-delay'?",
        "use one of",
        "exponential-delay",
    ),
    row(
        "restart-strategy/type=unknown",
        dag_file(restart_strategy={"restart-strategy.type": "retry-forever"}),
        PipelineWiringError,  # a ValueError, as every other setting's
        "restart-strategy.type",
        "'retry-forever'",
        "use one of: none (aliases off, disable)",
    ),
    row(
        "restart-strategy/type=number",
        dag_file(restart_strategy={"restart-strategy.type": 3}),
        PipelineWiringError,  # a ValueError, as every other setting's
        "restart-strategy.type",
        "unknown restart strategy 3",
        "use one of",
    ),
    row(
        "restart-strategy/misspelt-key",
        dag_file(restart_strategy={"restart-strategy.fixed-delay.atempts": 3}),
        PipelineWiringError,  # a ValueError, as every other setting's
        "'restart-strategy.fixed-delay.atempts'",
        "(value 3)",
        "did you mean 'restart-strategy.fixed-delay.attempts'?",
    ),
    restart("fixed-delay.attempts", "three", "an integer ≥ 0", "(default 1)"),
    restart("fixed-delay.attempts", -1, "an integer ≥ 0"),
    restart("fixed-delay.attempts", 2.5, "an integer ≥ 0"),
    restart("fixed-delay.attempts", True, "an integer ≥ 0"),
    restart("fixed-delay.delay", "10 parsecs", "a duration ≥ 0", "unknown time unit 'parsecs'", '"10 s"'),
    restart("fixed-delay.delay", "-5 s", "a duration ≥ 0", "not negative"),
    restart("fixed-delay.delay", "soon", "a duration ≥ 0", "cannot parse 'soon' as a duration"),
    restart("failure-rate.max-failures-per-interval", 0, "an integer ≥ 1"),
    restart("failure-rate.max-failures-per-interval", "many", "an integer ≥ 1"),
    restart("failure-rate.failure-rate-interval", "0 s", "a duration ≥ 1 ms", "(default '1 min')"),
    restart("failure-rate.failure-rate-interval", "10 parsecs", "a duration ≥ 1 ms", "unknown time unit"),
    restart("failure-rate.delay", "-1 min", "a duration ≥ 0"),
    restart("failure-rate.delay", "1 fortnight", "a duration ≥ 0", "unknown time unit 'fortnight'"),
    restart("exponential-delay.initial-backoff", "0 ms", "a duration ≥ 1 ms"),
    restart("exponential-delay.initial-backoff", "ten s", "a duration ≥ 1 ms", "cannot parse"),
    restart("exponential-delay.max-backoff", "10 parsecs", "a duration ≥ 1 ms", "unknown time unit"),
    row(
        "restart-strategy/exponential-delay.max-backoff<initial-backoff",
        dag_file(
            restart_strategy={
                "restart-strategy.type": "exponential-delay",
                "restart-strategy.exponential-delay.initial-backoff": "10 s",
                "restart-strategy.exponential-delay.max-backoff": "1 s",
            }
        ),
        PipelineWiringError,  # a ValueError, as every other setting's
        "max-backoff must be ≥ restart-strategy.exponential-delay.initial-backoff",
        "max-backoff '1 s' < initial-backoff '10 s'",
        "raise max-backoff or lower initial-backoff",
    ),
    restart("exponential-delay.backoff-multiplier", 0.5, "> 1", "(default 1.5)"),
    restart("exponential-delay.backoff-multiplier", 1, "> 1", "(default 1.5)"),  # Flink: must be > 1
    restart("exponential-delay.backoff-multiplier", "x2", "> 1"),
    restart("exponential-delay.reset-backoff-threshold", "0", "a duration ≥ 1 ms", "(default '1 h')"),
    restart("exponential-delay.reset-backoff-threshold", "-1 h", "a duration ≥ 1 ms"),
    restart("exponential-delay.jitter-factor", 1.5, "between 0 and 1", "(default 0.1)"),
    restart("exponential-delay.jitter-factor", -0.1, "between 0 and 1"),
    restart("exponential-delay.jitter-factor", "nan", "between 0 and 1"),
    restart("exponential-delay.attempts-before-reset-backoff", 0, "an integer ≥ 1 (or 'infinite')"),
    restart("exponential-delay.attempts-before-reset-backoff", "forever", "an integer ≥ 1 (or 'infinite')"),
    restart("exponential-delay.attempts-before-reset-backoff", 2.5, "an integer ≥ 1 (or 'infinite')"),
    row(
        "restart-strategy/type-unset-so-exponential-delay",
        dag_file(
            restart_strategy={
                "restart-strategy.exponential-delay.backoff-multiplier": 0.5,
            }
        ),
        PipelineWiringError,  # a ValueError, as every other setting's
        "restart-strategy.exponential-delay.backoff-multiplier",
        "got 0.5",
        "set it to > 1",
    ),
    restart(
        "fixed-delay.delay",
        "100000000000000000 h",
        "a duration ≥ 0",
        "overflows a 64-bit count of milliseconds (Flink rejects it too)",
        "use a shorter duration",
    ),
    restart(
        "failure-rate.delay",
        "2000000000000 d",
        "a duration ≥ 0",
        "overflows a 64-bit count of milliseconds",
        "use a shorter duration",
    ),
    restart(
        "exponential-delay.max-backoff",
        "99999999999999999999 ms",
        "a duration ≥ 1 ms",
        "does not fit a 64-bit integer",
    ),
    row(
        "restart-strategy/deprecated-key-with-unknown-type",
        dag_file(restart_strategy={"restart-strategy": "sometimes"}),
        PipelineWiringError,  # a ValueError, as every other setting's
        "restart-strategy.type",
        "unknown restart strategy 'sometimes'",
        "use one of",
    ),
    row(
        "restart-strategy/type=bogus-in-airflow.cfg",
        restart_strategy_in_airflow_cfg,
        PipelineWiringError,  # a ValueError, as every other setting's
        "restart-strategy.type",
        "'bogus'",
        "use one of",
        "(set in [ft_provider] of airflow.cfg)",
    ),
    # -- failure classification: failure_rules / failure_classifier on a pipeline or a stage --------
    row(
        "classification/pipeline:failure_rules-not-a-dict",
        dag_file(failure_rules="DIVIDE_BY_ZERO"),
        PipelineWiringError,
        "FailoverPipeline failure_rules='DIVIDE_BY_ZERO'",
        "give FailureRules(...) or a dict with the keys non_recoverable_error_classes",
    ),
    row(
        "classification/stage:failure_rules-unknown-key",
        dag_file(lambda: stage("a", failure_rules={"non_recoverable": ["DIVIDE_BY_ZERO"]})),
        PipelineWiringError,
        "stage 'a' failure_rules",
        "unknown key(s) ['non_recoverable']",
        "the keys are non_recoverable_error_classes",
    ),
    row(
        "classification/stage:error-class-not-a-name",
        dag_file(lambda: stage("a", failure_rules={"non_recoverable_error_classes": ["divide by zero"]})),
        PipelineWiringError,
        "non_recoverable_error_classes",
        "'divide by zero' is not a valid name",
        "e.g. 'UNRESOLVED_COLUMN'",
    ),
    row(
        "classification/pipeline:sql-state-too-long",
        dag_file(failure_rules={"non_recoverable_sql_states": ["4270399"]}),
        PipelineWiringError,
        "non_recoverable_sql_states",
        "'4270399' is not a valid name",
        "e.g. '42 or 22012'",
    ),
    row(
        "classification/stage:exceptions-a-string",
        dag_file(lambda: stage("a", failure_rules={"non_recoverable_exceptions": "ValueError"})),
        PipelineWiringError,
        "non_recoverable_exceptions='ValueError'",
        "give a tuple of names",
    ),
    row(
        "classification/pipeline:recoverable_exceptions-not-a-name",
        dag_file(failure_rules={"recoverable_exceptions": ["flaky lookup"]}),
        PipelineWiringError,
        "FailoverPipeline failure_rules",
        "recoverable_exceptions: 'flaky lookup' is not a valid name",
        "e.g. 'mypackage.FlakyLookup'",
    ),
    row(
        "classification/stage:failure_classifier-not-a-function",
        dag_file(lambda: stage("a", failure_classifier="lenient")),
        PipelineWiringError,
        "stage 'a' failure_classifier='lenient'",
        "give a function (exception) -> True (recoverable), False (not recoverable) or None",
    ),
    # -- checkpoint: every tuning key's bad value, Flink keys with no meaning here -------------------
    checkpointing("execution.checkpointing.interval", "often", "write a number with a unit"),
    checkpointing("execution.checkpointing.interval", "0 ms", "must be > 0"),
    checkpointing("execution.checkpointing.interval-volume", "a lot", "not a size", '"64 mb"'),
    checkpointing("execution.checkpointing.interval-volume", "0 kb", "between 1 byte and 1 pb"),
    checkpointing("execution.checkpointing.min-pause", "-5 s", "not negative"),
    row(
        "checkpoint/stage:min-pause-longer-than-timeout",
        dag_file(lambda: stage("a", checkpointing={"execution.checkpointing.min-pause": "1 h"})),
        PipelineWiringError,
        "execution.checkpointing.min-pause=3600 s",
        "execution.checkpointing.timeout=600 s",
        "would time out every checkpoint",
        "shorten",
    ),
    checkpointing("execution.checkpointing.timeout", "never", "write a number with a unit"),
    checkpointing("execution.checkpointing.tolerable-failed-checkpoints", -1, "whole number ≥ 0"),
    checkpointing("state.checkpoints.num-retained", 0, "whole number ≥ 1"),
    checkpointing("execution.checkpointing.incremental", "sometimes", "true or false"),
    checkpointing("execution.checkpointing.snapshot-compression", "zstd", "true or false"),
    checkpointing("state.backend.local-recovery", "local", "true or false", where="pipeline"),
    checkpointing(
        "execution.checkpointing.unaligned", True, "no checkpoint barriers", "interval-volume instead"
    ),
    checkpointing("execution.checkpointing.max-concurrent-checkpoints", 2, "one micro-batch at a time"),
    checkpointing("execution.checkpointing.mode", "AT_LEAST_ONCE", "exactly-once", "EXACTLY_ONCE"),
    checkpointing(
        "execution.checkpointing.intervall",
        "1 min",
        "unknown checkpoint key",
        "did you mean 'execution.checkpointing.interval'?",
    ),
    row(
        "checkpoint/checkpointing=yes",
        dag_file(lambda: stage("a", checkpointing="yes")),
        PipelineWiringError,
        "checkpointing='yes'",
        "give True, False or a dict",
    ),
    row(
        "checkpoint/staged-path-key-on-the-executors-path",
        dag_file(
            lambda: stage("a", checkpointing={"execution.checkpointing.tolerable-failed-checkpoints": 3})
        ),
        PipelineWiringError,
        "execution.checkpointing.tolerable-failed-checkpoints=3 (in checkpointing of stage 'a')",
        "data_path is 'executors'",
        "no checkpoint is uploaded",
        "remove the key, or give the stage data_path='staged'",
    ),
    row(
        "checkpoint/pipeline:staged-path-key-on-the-executors-path",
        dag_file(lambda: stage("a"), checkpointing={"state.backend.local-recovery": True}),
        PipelineWiringError,
        "state.backend.local-recovery=True (in FailoverPipeline(checkpointing=...))",
        "has no effect on stage 'a'",
        "already on the Spark side",
    ),
    row(
        "checkpoint/checkpointed-and-s3a",
        dag_file(lambda: stage("a", checkpointing=True), data_path="s3a"),
        PipelineWiringError,
        "checkpointed and its data_path is 's3a'",
        "give it data_path='executors'",
    ),
    row(
        "data-path/pipeline-unknown",
        dag_file(lambda: stage("a"), data_path="hdfs"),
        PipelineWiringError,
        "FailoverPipeline: data_path must be one of 'executors', 'staged', 's3a', got 'hdfs'",
    ),
    row(
        "data-path/stage-unknown",
        dag_file(lambda: stage("a", data_path="local")),
        PipelineWiringError,
        "stage 'a': data_path must be one of",
        "got 'local'",
    ),
    row(
        "checkpoint/interval=often-in-airflow.cfg",
        checkpoint_in_airflow_cfg,
        PipelineWiringError,
        "execution.checkpointing.interval='often'",
        "(in [ft_provider] of airflow.cfg)",
        "write a number with a unit",
    ),
    # -- failover-strategy --------------------------------------------------------------------------
    *[
        row(
            f"failover-strategy/{value!r}",
            dag_file(failover_strategy=value),
            ValueError,
            "jobmanager.execution.failover-strategy",
            f"got {value!r}",
            "must be 'region' or 'full'",
            "use 'region' to restart only the affected regions (default) or 'full'",
        )
        for value in ("regional", "restart-all", 1)
    ],
    row(
        "failover-strategy/in-restart_strategy-mapping",
        dag_file(restart_strategy={"jobmanager.execution.failover-strategy": "Pipelined-Region"}),
        ValueError,
        "jobmanager.execution.failover-strategy",
        "'Pipelined-Region'",
        "use 'region'",
    ),
    # -- wiring -------------------------------------------------------------------------------------
    row(
        "wiring/input-nobody-produces-typo",
        dag_file(lambda: (stage("a", outputs=["cleaned"]), stage("b", inputs=["claened"]))),
        PipelineWiringError,
        "stage 'b' consumes result 'claened'",
        "no stage of the pipeline produces",
        "did you mean 'cleaned'?",
    ),
    row(
        "wiring/input-nobody-produces",
        dag_file(lambda: stage("a", inputs=["raw"])),
        PipelineWiringError,
        "stage 'a' consumes result 'raw'",
        "which no stage of the pipeline produces",
        "produced results: none",
    ),
    row(
        "wiring/two-producers",
        dag_file(lambda: (stage("a", outputs=["x"]), stage("b", outputs=["x"]))),
        PipelineWiringError,
        "result 'x' is produced by both 'a' and 'b'",
        "every result needs exactly one producer",
    ),
    row(
        "wiring/self-consumption",
        dag_file(lambda: stage("a", inputs=["x"], outputs=["x"])),
        PipelineWiringError,
        "stage 'a' consumes its own output 'x'",
        "split it into two stages",
    ),
    row(
        "wiring/cycle",
        dag_file(lambda: (stage("a", inputs=["y"], outputs=["x"]), stage("b", inputs=["x"], outputs=["y"]))),
        PipelineWiringError,
        "form a cycle: a -> b -> a",
        "a stage cannot (indirectly) consume its own output",
    ),
    row(
        "wiring/explicit-edge-contradicts-partitions",
        dag_file(lambda: stage("a", outputs=["x"]) >> stage("b", outputs=["y"])),
        PipelineWiringError,
        "the edge a >> b contradicts the declared partitions",
        "'b' consumes none of the results of 'a'",
        "declare the input on 'b' or remove the edge",
    ),
    row(
        "auto-parallelism/unknown-key",
        dag_file(sized_by({"execution.batch.adaptive.auto-parallelism.avg-data-volume": "1 gb"})),
        PipelineWiringError,
        "auto_parallelism of 'auto_parallelism'",
        "unknown key 'execution.batch.adaptive.auto-parallelism.avg-data-volume'",
        "did you mean 'execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task'",
    ),
    row(
        "auto-parallelism/avg-data-volume-per-task=lots",
        dag_file(sized_by({"execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "lots"})),
        PipelineWiringError,
        "avg-data-volume-per-task='lots': not a size",
        'e.g. "64 mb", "1 gb"',
    ),
    row(
        "auto-parallelism/max-parallelism=0",
        dag_file(sized_by({"execution.batch.adaptive.auto-parallelism.max-parallelism": 0})),
        PipelineWiringError,
        "max-parallelism=0 must be a whole number ≥ 1",
        "e.g. execution.batch.adaptive.auto-parallelism.max-parallelism: 128",
    ),
    row(
        "auto-parallelism/min-above-max",
        dag_file(
            sized_by(
                {
                    "execution.batch.adaptive.auto-parallelism.min-parallelism": 8,
                    "execution.batch.adaptive.auto-parallelism.max-parallelism": 4,
                }
            )
        ),
        PipelineWiringError,
        "min-parallelism=8 is above execution.batch.adaptive.auto-parallelism.max-parallelism=4",
        "lower the first or raise the second",
    ),
    row(
        "auto-parallelism/pipelined-input",
        dag_file(sized_by({}, inputs="pipelined")),
        PipelineWiringError,
        "stage 'score' expands over auto_parallelism() and reads the pipelined result 'raw'",
        "make it blocking",
    ),
    row(
        "wiring/no-stages",
        dag_file(lambda: None),
        PipelineWiringError,
        "declares no stage operators",
        "inside the 'with FailoverPipeline(...):' block",
    ),
    row(
        "wiring/pipeline-outside-dag",
        pipeline_outside_dag,
        PipelineWiringError,
        "FailoverPipeline must be used inside a DAG",
        "'with DAG(...):' first",
    ),
    row(
        "wiring/two-pipelines-in-one-dag",
        two_pipelines_in_one_dag,
        PipelineWiringError,
        "already has a FailoverPipeline",
        "use one per DAG",
    ),
    row(
        "wiring/stage-reuse-unknown",
        dag_file(lambda: stage("a", outputs=["x"], reuse="no")),
        ValueError,
        "stage 'a': reuse must be one of 'off', 'within-run', 'across-runs', got 'no'",
    ),
    row(
        "wiring/pipeline-reuse-unknown",
        dag_file(reuse=True),
        ValueError,
        "FailoverPipeline: reuse must be one of 'off', 'within-run', 'across-runs', got True",
    ),
    row(
        "wiring/unknown-output-kind",
        dag_file(lambda: stage("a", outputs={"x": "streaming"})),
        ValueError,
        "output 'x': unknown value 'streaming'",
        "use one of 'blocking', 'pipelined'",
    ),
    row(
        "wiring/unknown-input-pattern",
        dag_file(lambda: (stage("a", outputs=["x"]), stage("b", inputs={"x": "broadcast"}))),
        ValueError,
        "input 'x': unknown value 'broadcast'",
        "use one of",
    ),
    row(
        "wiring/output-declared-twice",
        dag_file(lambda: stage("a", outputs=["x", "x"])),
        ValueError,
        "output 'x' is declared twice",
        "declare each output once",
    ),
    row(
        "wiring/result-name-with-dotdot",
        dag_file(lambda: stage("a", outputs=["../raw"])),
        ValueError,
        "invalid result name '../raw'",
        "use 1-250 letters, digits, '_', '.' or '-'",
    ),
    row(
        "wiring/result-name-with-slash",
        dag_file(lambda: stage("a", outputs=["raw/2026"])),
        ValueError,
        "invalid result name 'raw/2026'",
        "use 1-250 letters",
    ),
    row(
        "wiring/result-name-with-NUL",
        dag_file(lambda: stage("a", outputs=["raw\x00"])),
        ValueError,
        "invalid result name 'raw\\x00'",
        "use 1-250 letters",
    ),
    row(
        "wiring/result-name-overlong",
        dag_file(lambda: stage("a", outputs=["r" * 251])),
        ValueError,
        "invalid result name 'rrrr",
        "use 1-250 letters",
    ),
    row(
        "wiring/dag-id-starting-with-dash",
        dag_with_id("-etl"),
        PipelineWiringError,
        "DAG id '-etl' cannot name a failover pipeline",
        "use letters, digits, '_', '.' or '-'",
        "starting with a letter, digit or '_'",
        "rename the DAG",
    ),
    row(
        "wiring/dag-id-non-ascii",
        dag_with_id("état_ventes"),
        PipelineWiringError,
        "DAG id 'état_ventes' cannot name a failover pipeline",
        "use letters, digits",
        "rename the DAG",
    ),
    row(
        "wiring/stage-with-own-retries",
        dag_file(lambda: stage("a", retries=3)),
        PipelineWiringError,
        "stage 'a' sets retries=3 (as an argument of the stage)",
        "the restart strategy decides",
        "remove retries from the stage",
        "configure restarts with restart_strategy=",
    ),
    row(
        "wiring/stage-retries-from-default_args",
        dag_with_default_args(retries=2),
        PipelineWiringError,
        "stage 'a' sets retries=2 (from default_args of DAG",
        "default_args apply to every task",
        "set it on the tasks that are not stages",
    ),
    row(
        "wiring/mapped-stage-retries-in-partial",
        dag_file(mapped_stage_with_retries),
        PipelineWiringError,
        "stage 'm' sets retries=5 (as an argument of the stage or its .partial())",
        "the restart strategy decides",
    ),
    row(
        "wiring/stage-with-own-retry_policy",
        dag_file(lambda: stage("a", retry_policy=object())),
        PipelineWiringError,
        "stage 'a' sets retry_policy=<object object",
        "remove retry_policy from the stage",
    ),
    row(
        "wiring/result-name-with-trailing-newline",
        dag_file(lambda: stage("a", outputs=["raw\n"])),
        ValueError,
        "invalid result name 'raw\\n'",
        "use 1-250 letters",
    ),
    # -- s3-connection ------------------------------------------------------------------------------
    *s3_connection_rows(),
    # -- s3-endpoint --------------------------------------------------------------------------------
    # Probed before the first conditional write, with an object under the store's prefix that is
    # removed again; the commit uploads nothing.
    *(
        row(
            f"s3-endpoint/ignores-conditional-writes/{name}",
            through_an_endpoint_ignoring_conditions(operation),
            ConditionalWritesUnsupported,
            f"the S3 endpoint http://127.0.0.1:{IGNORING_PORT} ignores conditional writes",
            "If-None-Match: * replaced an existing object instead of answering 412 Precondition Failed",
            "If-Match: <another ETag> replaced the object",
            "a zombie try can replace a newer partition's manifest",
            "Use an endpoint that enforces If-None-Match and If-Match on PutObject",
            "by setting [ft_provider] partition_store_allow_unconditional_writes = True",
        )
        for name, operation in (("commit", STORE_OPERATIONS["commit"]), ("journal-update", journal_update))
    ),
    # -- store-config -------------------------------------------------------------------------------
    row(
        "store-config/store-url-without-s3-scheme",
        dag_file(lambda: stage("a", outputs=["x"]), store="lake/etl"),
        ValueError,
        "invalid partition store URL 'lake/etl'",
        "use s3://bucket/prefix/",
    ),
    row(
        "store-config/no-store-url",
        store_without_url,
        ValueError,
        "no partition store URL",
        "pass url='s3://bucket/prefix/'",
        "AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL",
    ),
    row(
        "store-config/partition_store_retention=7-parsecs",
        setting("partition_store_retention", "7 parsecs"),
        ValueError,
        "[ft_provider] partition_store_retention",
        "'7 parsecs'",
        "write a number with a unit",
    ),
    row(
        "store-config/partition_store_sweep_interval=hourly",
        sweep_setting("partition_store_sweep_interval", "hourly"),
        ValueError,
        "[ft_provider] partition_store_sweep_interval",
        "'hourly'",
        "write a number with a unit",
    ),
    row(
        "store-config/partition_store_sweep_max_runs=0",
        sweep_setting("partition_store_sweep_max_runs", "0"),
        ValueError,
        "[ft_provider] partition_store_sweep_max_runs",
        "a whole number >= 1",
        "'0'",
    ),
    row(
        "pipeline/retention=forever",
        dag_file(retention="forever"),
        PipelineWiringError,
        "FailoverPipeline retention='forever'",
        "write a number with a unit",
        "retention='3 d'",
    ),
    row(
        "store-config/partition_store_cache_max_size=lots",
        cache_setting("partition_store_cache_max_size", "lots"),
        ValueError,
        "[ft_provider] partition_store_cache_max_size",
        "'lots'",
        "not a size",
        '"64 mb"',
    ),
    row(
        "store-config/partition_store_cache_max_age=0-s",
        cache_setting("partition_store_cache_max_age", "0 s"),
        ValueError,
        "[ft_provider] partition_store_cache_max_age",
        "must be > 0 s (or none)",
        "'0 s'",
    ),
    row(
        "store-config/partition_store_retention=2000000000000-d",
        setting("partition_store_retention", "2000000000000 d"),
        ValueError,
        "[ft_provider] partition_store_retention",
        "'2000000000000 d'",
        "overflows a 64-bit count of milliseconds",
        "use a shorter duration",
    ),
    row(
        "store-config/partition_store_orphan_grace=negative",
        setting("partition_store_orphan_grace", "-1 h"),
        ValueError,
        "[ft_provider] partition_store_orphan_grace",
        "'-1 h'",
        "not negative",
    ),
    row(
        "store-config/partition_store_allow_unconditional_writes=maybe",
        setting("partition_store_allow_unconditional_writes", "maybe"),
        ValueError,
        "[ft_provider] partition_store_allow_unconditional_writes",
        "must be True or False, got 'maybe'",
    ),
    row(
        "store-config/wait_for_running_work=maybe",
        stage_try_setting("wait_for_running_work", "maybe"),
        ValueError,
        "[ft_provider] wait_for_running_work",
        "must be True or False, got 'maybe'",
    ),
    row(
        "store-config/executor_credentials=both",
        executor_setting("executor_credentials", "both"),
        ValueError,
        "[ft_provider] executor_credentials must be 'connection'",
        "or 'executor' (they use their own role), got 'both'",
    ),
    row(
        "store-config/data_path=hdfs",
        parsed_with_setting("data_path", "hdfs"),
        PipelineWiringError,
        "[ft_provider] data_path: data_path must be one of 'executors', 'staged', 's3a', got 'hdfs'",
    ),
    row(
        "store-config/partition_store_conn_id=undefined-connection",
        cluster_store_connection,
        AirflowNotFoundException,
        "the partition store's connection 'ft_cluster_store_never_defined' is not defined",
        "AIRFLOW_CONN_FT_CLUSTER_STORE_NEVER_DEFINED",
    ),
    row(
        "store-config/partition_store_checksum=md5",
        setting("partition_store_checksum", "md5"),
        ValueError,
        "[ft_provider] partition_store_checksum",
        "unknown checksum algorithm 'md5'",
        "use one of ['crc32', 'crc32c', 'sha256']",
    ),
    # -- airflow-api --------------------------------------------------------------------------------
    row(
        "airflow-api/undefined-connection",
        clear_through_api("ft_api_never_defined"),
        AirflowNotFoundException,
        "connection 'ft_api_never_defined' is not defined",
        "AIRFLOW_CONN_FT_API_NEVER_DEFINED='https://",
    ),
    row(
        "airflow-api/connection-without-login",
        clear_through_api("ft_api_no_login", host="127.0.0.1", port=8080),
        ValueError,
        "connection 'ft_api_no_login' needs host and login/password",
        "AIRFLOW_CONN_AIRFLOW_API='http://admin:secret@localhost:8080'",
    ),
    row(
        "airflow-api/connection-without-host",
        clear_through_api("ft_api_no_host", login="admin", password="x"),
        ValueError,
        "connection 'ft_api_no_host' needs host and login/password",
        "AIRFLOW_CONN_AIRFLOW_API='http://admin:secret@localhost:8080'",
    ),
    row(
        "airflow-api/wrong-password",
        clear_through_api(
            "ft_api_wrong_password",
            host="127.0.0.1",
            port="<fake api port>",
            login="admin",
            password=WRONG_API_PASSWORD,
        ),
        AirflowApiError,
        "POST /auth/token answered 401",
        "login of 'admin' refused",
        "check the connection 'ft_api_wrong_password'",
    ),
    row(
        "airflow-api/unreachable-api-server",
        clear_through_api(
            "ft_api_unreachable", host="127.0.0.1", port=CLOSED_PORT, login="admin", password="x"
        ),
        AirflowApiUnreachable,
        f"http://127.0.0.1:{CLOSED_PORT}",
        "connection 'ft_api_unreachable'",
        "Connection refused",
        "check host, port and schema",
    ),
    row(
        "airflow-api/plain-http-to-a-remote-host",
        clear_through_api(
            "ft_api_plain_http",
            host="airflow-api.example.com",
            port=8080,
            login="admin",
            password=WRONG_API_PASSWORD,
        ),
        ValueError,
        "connection 'ft_api_plain_http' would send the password of 'admin' in clear text over http",
        "'airflow-api.example.com', which is not a loopback address",
        "use https",
        '{"allow_insecure_http": true}',
    ),
    row(
        "airflow-api/verify-is-not-a-ca-bundle",
        clear_through_api(
            "ft_api_bad_verify",
            host="127.0.0.1",
            port="<fake api port>",
            schema="https",
            login="admin",
            password=WRONG_API_PASSWORD,
            extra={"verify": "/no/such/ca.pem"},
        ),
        ValueError,
        "connection 'ft_api_bad_verify': extra verify='/no/such/ca.pem'",
        "neither true/false nor an existing CA bundle",
        "give the path of the PEM file",
    ),
    # -- spark --------------------------------------------------------------------------------------
    # SparkSubmitHook alone would log "defaulting to yarn" and submit there; the stage refuses first.
    row(
        "spark/undefined-connection",
        spark_submit_with_undefined_connection,
        SparkConnectionMissing,
        "spark connection 'ft_spark_never_defined' is not defined",
        "AIRFLOW_CONN_FT_SPARK_NEVER_DEFINED",
        "spark_conn_id=",
    ),
    # -- faults: a run's ft_faults that names what the pipeline lacks (a typo looked like a recovery)
    row(
        "faults/misspelt-task",
        faults_in_run_conf([{"task": "extrct[1]"}]),
        AirflowFailException,
        "invalid ft_faults in the run's conf",
        "no task 'extrct[1]'",
        "tasks: extract[0], extract[1], report",
    ),
    row(
        "faults/misspelt-partition",
        faults_in_run_conf([{"task": "report", "delete": ["order[0]"]}]),
        AirflowFailException,
        "no partition 'order[0]'",
        "partitions: orders[0], orders[1]",
    ),
    row(
        "faults/times-not-a-number",
        faults_in_run_conf([{"task": "report", "times": "2"}]),
        AirflowFailException,
        "times must be an integer ≥ 1, got '2'",
    ),
    row(
        "faults/batch-mode-without-its-batch",
        faults_in_run_conf([{"task": "report", "mode": "batch"}]),
        AirflowFailException,
        "mode 'batch' takes 'batch'",
        "the micro-batch (≥ 0)",
    ),
    row(
        "faults/batch-not-a-number",
        faults_in_run_conf([{"task": "report", "mode": "batch", "batch": "3"}]),
        AirflowFailException,
        "mode 'batch' takes 'batch'",
        "'batch': '3'",
    ),
    row(
        "faults/batch-without-mode-batch",
        faults_in_run_conf([{"task": "report", "batch": 3}]),
        AirflowFailException,
        "and only it does",
    ),
    # -- name ---------------------------------------------------------------------------------------
    row(
        "name/result-dotdot",
        commit(lambda: RunRef("etl", RUN_ID).partition("..")),
        ValueError,
        "invalid result name '..'",
        "use letters, digits",
        "no '/', '..'",
    ),
    row(
        "name/result-dotdot-slash",
        lambda env: env.store.check_availability("etl", RUN_ID, ["../orders"]),
        ValueError,
        "invalid result name '../orders'",
        "use letters, digits",
    ),
    row(
        "name/result-slash",
        lambda env: env.store.fetch(PartitionRef("etl", RUN_ID, "a/b"), env.dest),
        ValueError,
        "invalid result name 'a/b'",
        "no '/'",
    ),
    row(
        "name/result-NUL",
        commit(lambda: PartitionRef("etl", RUN_ID, "orders\x00")),
        ValueError,
        "invalid result name 'orders\\x00'",
        "control characters",
    ),
    row(
        "name/result-inner-newline",
        commit(lambda: PartitionRef("etl", RUN_ID, "ord\ners")),
        ValueError,
        "invalid result name 'ord\\ners'",
        "control characters",
    ),
    row(
        "name/result-trailing-newline",
        commit(lambda: PartitionRef("etl", RUN_ID, "orders\n")),
        ValueError,
        "invalid result name 'orders\\n'",
        "control characters",
    ),
    row(
        "name/result-overlong",
        commit(lambda: PartitionRef("etl", RUN_ID, "r" * 251)),
        ValueError,
        "invalid result name 'rrrr",
        "longer than 250 characters; shorten it",
    ),
    row(
        "name/partition-id-not-result[i]",
        lambda env: env.store.release_run("etl", RUN_ID, partitions=["orders[x]"]),
        ValueError,
        "invalid partition id 'orders[x]'",
        "use 'result' for an unmapped producer or 'result[i]'",
    ),
    row(
        "name/map-index-negative",
        commit(lambda: PartitionRef("etl", RUN_ID, "orders", -2)),
        ValueError,
        "invalid map index -2",
        "use None or -1 for an unmapped producer",
    ),
    row(
        "name/pipeline-dotdot",
        lambda env: env.store.release_run("../etl", RUN_ID),
        ValueError,
        "invalid pipeline (DAG id) '../etl'",
        "use letters, digits",
    ),
    row(
        "name/pipeline-slash",
        lambda env: env.store.release_run("etl/x", RUN_ID),
        ValueError,
        "invalid pipeline (DAG id) 'etl/x'",
        "no '/'",
    ),
    row(
        "name/pipeline-trailing-newline",
        lambda env: env.store.release_run("etl\n", RUN_ID),
        ValueError,
        "invalid pipeline (DAG id) 'etl\\n'",
        "control characters",
    ),
    row(
        "name/run-id-dotdot",
        lambda env: env.store.release_run("etl", ".."),
        ValueError,
        "invalid run id '..'",
        "must not be '.' or '..'",
        "use the id exactly as Airflow made it",
    ),
    row(
        "name/run-id-slash",
        lambda env: env.store.release_run("etl", "manual__x/../../y"),
        ValueError,
        "invalid run id 'manual__x/../../y'",
        "found ['/']",
        "use the id exactly as Airflow made it",
    ),
    row(
        "name/run-id-newline",
        commit(lambda: PartitionRef("etl", "manual__1\n", "orders")),
        ValueError,
        "invalid run id 'manual__1\\n'",
        "control characters",
    ),
    row(
        "name/run-id-NUL",
        lambda env: env.store.check_availability("etl", "manual\x00", ["orders"]),
        ValueError,
        "invalid run id 'manual\\x00'",
        "control characters",
    ),
    row(
        "name/run-id-overlong-once-encoded",
        lambda env: env.store.check_availability("etl", "manual__" + ":" * 100, ["orders"]),
        ValueError,
        "invalid run id",
        "of 308 characters",
        "longer than 240",
        "use a shorter id",
    ),
    row(
        "name/run-id-overlong",
        lambda env: env.store.release_run("etl", "m" * 251),
        ValueError,
        "invalid run id 'mmmm",
        "longer than 250 characters; shorten it",
    ),
    row(
        "name/consumer-escaping",
        lambda env: env.store.register_consumer("etl", RUN_ID, "../../leases/x"),
        ValueError,
        "invalid consumer '../../leases/x'",
        "must not be '.' or '..' nor contain '/'",
    ),
    row(
        "name/consumer-control-char",
        lambda env: env.store.register_consumer("etl", RUN_ID, "report\r"),
        ValueError,
        "invalid consumer 'report\\r'",
        "control characters",
    ),
    row(
        "name/execution-id-dotdot",
        lambda env: env.store.commit(
            SEEDED, env.source, producer=Producer("extract", 0, 1), execution_id="../exec"
        ),
        ValueError,
        "invalid execution id '../exec'",
        "use letters, digits",
    ),
    row(
        "name/attempt-id-dotdot",
        lambda env: env.store.attempt_location(SEEDED, "../../other"),
        ValueError,
        "invalid attempt id '../../other'",
        "use letters, digits",
    ),
    row(
        "name/source-file-with-newline",
        commit(lambda: SEEDED),
        ValueError,
        "invalid file name 'bad\\nname.parquet'",
        "no '..', empty segments, spaces or control characters",
        setup=source_with_file("bad\nname.parquet"),
    ),
    row(
        "name/bucket-uppercase-underscore",
        lambda env: S3PartitionStore(env.client, "s3://My_Bucket/p/"),
        ValueError,
        "invalid S3 bucket name 'My_Bucket'",
        "use 3-63 lowercase letters",
    ),
    row(
        "name/bucket-dotdot",
        lambda env: S3PartitionStore(env.client, "s3://a..b/p/"),
        ValueError,
        "invalid S3 bucket name 'a..b'",
        "use 3-63 lowercase letters",
    ),
    row(
        "name/bucket-trailing-newline",
        lambda env: S3PartitionStore(env.client, f"s3://{env.bucket}\n/p/"),
        ValueError,
        "invalid S3 bucket name",
        "use 3-63 lowercase letters",
    ),
    uploaded_file_row("name/uploaded-file-name-with-space", "part 0.parquet", "t1-0123456789abcdef"),
    uploaded_file_row("name/uploaded-file-name-with-colon", "part:0.parquet", "t1-0123456789abcde0"),
    uploaded_file_row("name/uploaded-file-name-starting-with-dash", "-part.parquet", "t1-0123456789abcde1"),
    row(
        "name/store-prefix-dotdot",
        lambda env: S3PartitionStore(env.client, f"s3://{env.bucket}/../escape/"),
        ValueError,
        "invalid store prefix '../escape'",
        "segment '..' is not allowed",
    ),
    # -- manifest -----------------------------------------------------------------------------------
    # GAP (all PartitionNotFound rows): the message names the partition, the run and the problem, but
    # no fix (e.g. "re-run the producer or delete s3://…/manifest.json"); only schema_version says what
    # to do. By design region failover re-runs the producer of an unavailable partition.
    bad_manifest("not-json", b"<html>Access denied</html>", "manifest is not JSON"),
    bad_manifest("not-utf8", b"\xff\xfe{}", "manifest is not JSON"),
    bad_manifest("json-array", b"[]", "manifest must be a JSON object, got list"),
    bad_manifest("empty-object", b"{}", "manifest does not validate: 'schema_version' is missing"),
    bad_manifest(
        "files-not-a-list", manifest(files="part-0.parquet"), "'files' must be list, got 'part-0.parquet'"
    ),
    bad_manifest("size-is-a-string", manifest(file0__size="100"), "'size' must be int, got '100'"),
    bad_manifest("negative-size", manifest(file0__size=-1), "must be ≥ 0, got -1"),
    bad_manifest(
        "checksum-md5",
        manifest(file0__checksum="md5:abc"),
        "must be 'crc32c:<8 hex>', 'sha256:<64 hex>' or 'crc32:<8 hex>'",
        "got 'md5:abc'",
    ),
    bad_manifest(
        "future-schema-version",
        manifest(schema_version=99),
        "schema_version 99 is not supported",
        "upgrade the provider on this worker",
    ),
    bad_manifest(
        "created_at-without-zone",
        manifest(created_at="2026-11-22T04:00:00"),
        "created_at must carry a time zone",
    ),
    bad_manifest("attempt-id-dotdot", manifest(attempt_id=".."), "invalid attempt id '..'"),
    bad_manifest(
        "content-not-a-row-checksum",
        manifest(content="rows1:not-hex"),
        "content must be '<scheme>:<32 hex>', got 'rows1:not-hex'",
    ),
    bad_manifest("lineage-not-a-digest", manifest(lineage="ab" * 33), "lineage must be 64 hex digits"),
    bad_manifest(
        "file-key-escapes-with-dotdot",
        manifest(file0__key="../../x"),
        "invalid file key '../../x'",
        "segment '..' is not allowed",
    ),
    bad_manifest(
        "file-key-absolute",
        manifest(file0__key="/etc/passwd"),
        "invalid file key '/etc/passwd'",
        "must be a non-empty relative path",
    ),
    bad_manifest(
        "file-key-in-another-attempt",
        manifest(file0__key="attempts/other/part.bin"),
        "file key 'attempts/other/part.bin' is outside the attempt directory",
    ),
    bad_manifest(
        "file-key-NUL", manifest(file0__key=first_key_plus("\x00")), "invalid file key", "is not allowed"
    ),
    bad_manifest(
        "file-key-trailing-newline",
        manifest(file0__key=first_key_plus("\n")),
        "invalid file key",
        "is not allowed",
    ),
    bad_manifest(
        "describes-another-result",
        manifest(partition__result="orders"),
        f"manifest describes partition etl/{RUN_ID}/orders[0], expected etl/{RUN_ID}/planted[0]",
    ),
    bad_manifest(
        "describes-another-run",
        manifest(partition__run_id="manual__other"),
        "manifest describes partition etl/manual__other/planted[0]",
        f"expected etl/{RUN_ID}/planted[0]",
    ),
    bad_manifest(
        "describes-another-map-index",
        manifest(partition__map_index=7),
        f"manifest describes partition etl/{RUN_ID}/planted[7], expected",
    ),
    bad_manifest(
        "pipelined-kind-at-blocking-key",
        manifest(partition__kind="pipelined"),
        "manifest is for a pipelined partition, expected blocking",
    ),
    bad_manifest(
        "oversized", OVERSIZED, "over the 1048576-byte limit", "the producer's next commit replaces it"
    ),
    bad_manifest("deeply-nested", DEEP, "manifest is not JSON: nested deeper than 32 levels"),
    bad_manifest(
        "deeply-nested-inside",
        b'{"schema_version": 1, "files": ' + DEEP + b"}",
        "manifest is not JSON: nested deeper than 32 levels",
    ),
    bad_manifest(
        "5000-digit-integer",
        b'{"schema_version": 1' + b"0" * 4999 + b"}",
        "manifest is not JSON: integer 10000000000000000000… (5000 digits) does not fit 64 bits",
    ),
    bad_manifest(
        "NaN", b'{"schema_version": 1, "row_count": NaN}', "manifest is not JSON: NaN is not a JSON number"
    ),
    bad_manifest(
        "Infinity", b'{"schema_version": 1, "row_count": -Infinity}', "-Infinity is not a JSON number"
    ),
    bad_manifest(
        "duplicate-key",
        b'{"attempt_id": "t2-a", "attempt_id": "t1-b"}',
        "key 'attempt_id' appears twice in one object",
    ),
    bad_manifest("lone-surrogate", b'{"attempt_id": "\\ud800"}', "holds a lone surrogate"),
    bad_manifest(
        "file-key-backslash-dotdot",
        manifest(file0__key=first_key_plus("\\..\\..\\x")),
        "invalid file key",
        "is not allowed",
    ),
    bad_manifest(
        "file-key-is-the-attempt-directory",
        manifest(file0__key=lambda doc: doc["files"][0]["key"].rsplit("/", 1)[0] + "/"),
        "invalid file key",
        "segment '' is not allowed",
    ),
    bad_manifest(
        "file-is-also-a-directory",
        manifest(files=also_a_directory),
        "is also the directory of",
        "a partition cannot hold both",
    ),
    cached_bad_manifest(
        "file-key-escapes-with-dotdot",
        manifest(file0__key="../../x"),
        "invalid file key '../../x'",
        "segment '..' is not allowed",
    ),
    cached_bad_manifest(
        "file-key-in-another-attempt",
        manifest(file0__key="attempts/other/part.bin"),
        "file key 'attempts/other/part.bin' is outside the attempt directory",
    ),
    cached_bad_manifest(
        "file-is-also-a-directory", manifest(files=also_a_directory), "is also the directory of"
    ),
    # Valid sizes and checksums, names no file system holds: before the limits, a raw OSError
    # (errno 36, "File name too long") that failover could not blame on the partition.
    bad_manifest(
        "file-key-300-character-name",
        manifest(file0__key=first_key_plus("x" * 300)),
        "invalid file key",
        "longer than 240",
        "shorten the writer's file names",
    ),
    bad_manifest(
        "file-key-4800-character-path",
        manifest(file0__key=first_key_plus("/d" * 2400)),
        "invalid file key",
        "4",
        "longer than 512",
        "nest fewer directories",
    ),
    cached_bad_manifest(
        "file-key-300-character-name",
        manifest(file0__key=first_key_plus("x" * 300)),
        "invalid file key",
        "longer than 240",
    ),
    cached_bad_manifest(
        "file-key-4800-character-path",
        manifest(file0__key=first_key_plus("/d" * 2400)),
        "invalid file key",
        "longer than 512",
    ),
    row(
        "name/uploaded-file-name-300-characters",
        uploaded("p" * 300 + ".parquet", "t1-0123456789abcde2")[1],
        ValueError,
        "cannot publish s3://",
        "invalid file name",
        "longer than 240",
        "Readers would reject",
        setup=uploaded("p" * 300 + ".parquet", "t1-0123456789abcde2")[0],
    ),
]


@pytest.mark.parametrize("case", CATALOGUE)
def test_bad_input(case: Case, env: Env) -> None:
    if case.setup is not None:
        case.setup(env)
    before = snapshot(env)
    with pytest.raises(Exception) as excinfo:
        case.provoke(env)
    err, message = excinfo.value, str(excinfo.value)
    assert type(err) is case.error, f"expected {case.error.__name__}, got {type(err).__name__}: {message}"
    missing = [words for words in case.says if words not in message]
    assert not missing, f"the message lacks {missing}:\n{message}"
    for secret in (env.s3.secret_key, WRONG_SECRET, WRONG_API_PASSWORD):
        assert secret not in message
    assert snapshot(env) == before, "the bad input changed the bucket, the tmp dir or Airflow"


def test_a_commit_replaces_an_oversized_manifest(env: Env) -> None:
    """An oversized object at the manifest key is invalid like any other: the producer's next commit
    replaces it (fencing cannot be read from it), and readers then see the new partition."""
    plant(OVERSIZED)(env)
    manifest = commit_planted(env)
    assert env.store.manifest(PLANTED) == manifest
    assert env.store.check_availability("etl", RUN_ID, [PLANTED], deep=True).available == {"planted[0]"}


def test_orphan_clean_up_treats_an_oversized_manifest_as_invalid(env: Env) -> None:
    """Clean-up reads manifests as readers do: an oversized one references no attempt (like any
    invalid manifest), so the attempts beside it are orphans -- it does not fail the clean-up."""
    ref = PartitionRef("etl", f"orphans_{uuid.uuid4().hex[:8]}", "planted", 0)  # a run of its own
    prefix = env.store.layout.partition_prefix(ref)
    env.client.put_object(Bucket=env.bucket, Key=prefix + "manifest.json", Body=OVERSIZED)
    stale = prefix + "attempts/t1-0123456789abcdef/part-0.bin"
    env.client.put_object(Bucket=env.bucket, Key=stale, Body=b"data of a crashed commit")
    report = env.store.cleanup_orphans("etl", ref.run_id, grace=0)
    assert report.deleted_keys == (stale,)
