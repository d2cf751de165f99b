"""Airflow hook that turns an ``aws`` connection into a boto3 S3 client and a partition store.

It is the Amazon provider's ``AwsBaseHook`` (``client_type="s3"``), so every auth mode of an ``aws``
connection works: keys (login = access key id, password = secret access key, extra
``aws_session_token``), ``role_arn`` (assume role, also with SAML or web identity), ``profile_name``,
and with no keys boto3's standard credential chain (environment, instance or pod role); extra
``region_name``, ``endpoint_url`` (S3-compatible stores), ``service_config``, ``config_kwargs``
(botocore Config), ``verify``. Credentials are never logged; only the endpoint and region are.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import urllib.parse
from functools import cached_property
from typing import Any

from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.partitions.cache import DEFAULT_MAX_AGE as DEFAULT_CACHE_MAX_AGE
from airflow_ft_provider.partitions.cache import DEFAULT_MAX_BYTES as DEFAULT_CACHE_MAX_BYTES
from airflow_ft_provider.partitions.cache import LocalPartitionCache
from airflow_ft_provider.partitions.errors import PartitionStoreError
from airflow_ft_provider.partitions.manifest import DEFAULT_CHECKSUM, check_algorithm
from airflow_ft_provider.partitions.s3_client import S3Client
from airflow_ft_provider.partitions.s3_models import share_loader
from airflow_ft_provider.partitions.store import DEFAULT_ORPHAN_GRACE, DEFAULT_RETENTION, S3PartitionStore
from airflow_ft_provider.partitions.sweep import DEFAULT_SWEEP_EVERY, DEFAULT_SWEEP_MAX_RELEASES, SweepLimits
from airflow_ft_provider.spark.spec import StoreAccess, StoreCredentials

CONFIG_SECTION = "ft_provider"


_CLIENTS: dict[tuple[int, str], Any] = {}  # (pid, digest of the connection settings) -> client
_CLIENTS_LOCK = threading.Lock()


class PartitionStoreHook(AwsBaseHook):
    """S3 access for the result-partition store.

    :param aws_conn_id: an ``aws`` connection; when it is ``aws_default`` and not defined, boto3's
        standard credential chain is used, as in the Amazon provider.
    :param url: ``s3://bucket/prefix/`` of the store; default ``[ft_provider] partition_store_url``.
    :param region_name: overrides the connection's ``region_name``.
    :param cache_dir: local task-recovery cache; default ``[ft_provider] partition_store_cache_dir``.

    The store refuses to write to an endpoint that ignores conditional writes unless
    ``[ft_provider] partition_store_allow_unconditional_writes`` is on (unsafe).
    """

    hook_name = "Partition store (S3)"

    def __init__(
        self,
        aws_conn_id: str | None = AwsBaseHook.default_conn_name,
        *,
        url: str | None = None,
        region_name: str | None = None,
        cache_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs["client_type"] = "s3"
        super().__init__(aws_conn_id=aws_conn_id, region_name=region_name, **kwargs)
        self.url = url
        self.cache_dir = cache_dir

    def _settings_digest(self) -> str:
        """What makes one client differ from another, hashed (no secret is kept in clear); a
        connection that is missing or of the wrong type is a clear error first."""
        from airflow.sdk.exceptions import AirflowNotFoundException

        fields: dict[str, object] = {"region": self._region_name}
        if self.aws_conn_id:
            try:
                conn = self.get_connection(self.aws_conn_id)
            except AirflowNotFoundException:
                if self.aws_conn_id != self.default_conn_name:
                    raise AirflowNotFoundException(
                        f"the partition store's connection {self.aws_conn_id!r} is not defined; define an "
                        f"'aws' connection (e.g. AIRFLOW_CONN_{self.aws_conn_id.upper()}) or pass "
                        "aws_conn_id='aws_default' to use the standard AWS credential chain"
                    ) from None
                self.log.info(
                    "connection %r not defined; using boto3's standard credential chain", self.aws_conn_id
                )
            else:
                if conn.conn_type not in (None, "", "aws"):
                    raise ValueError(
                        f"connection {self.aws_conn_id!r} has type {conn.conn_type!r}; the partition store "
                        "needs an 'aws' connection (login = access key id, password = secret key, or "
                        "extra role_arn; extra endpoint_url/region_name)"
                    )
                fields.update(
                    login=conn.login,
                    password=conn.password,
                    host=conn.host,
                    extra=conn.extra_dejson,
                )
        return hashlib.sha256(json.dumps(fields, sort_keys=True, default=repr).encode()).hexdigest()

    def get_client(self) -> S3Client:
        """A boto3 S3 client for the connection (``AwsBaseHook``'s session: assumed roles refresh
        themselves), shared within this process by every store on the same connection settings: a task
        try opens several stores. boto3 clients are thread-safe; a forked process makes its own
        (connection pools do not survive a fork). botocore's parsed data files are shared by all
        clients of the process (``partitions/s3_models.py``)."""
        from botocore.config import Config

        key = (os.getpid(), self._settings_digest())
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                session = share_loader(self.get_session(region_name=self.region_name))
                endpoint_url = self.conn_config.get_service_endpoint_url("s3")
                # the connection's config_kwargs win over these defaults
                config = Config(retries={"mode": "standard"}, max_pool_connections=16).merge(self.config)
                self.log.info(
                    "S3 client for connection %r: endpoint %s, region %s%s",
                    self.aws_conn_id,
                    endpoint_url or "AWS default",
                    self.region_name or "from the environment",
                    f", assuming role {self.conn_config.role_arn}" if self.conn_config.role_arn else "",
                )
                client = _CLIENTS[key] = session.client(
                    "s3", endpoint_url=endpoint_url, config=config, verify=self.verify
                )
        return client

    @cached_property
    def client(self) -> S3Client:
        return self.get_client()

    def get_store(self, **kwargs: Any) -> S3PartitionStore:
        """The partition store at ``url`` (or the configured one); ``kwargs`` go to S3PartitionStore."""
        url = self.url or _config("partition_store_url")
        if not url:
            raise ValueError(
                "no partition store URL: pass url='s3://bucket/prefix/' or set [ft_provider] "
                "partition_store_url (AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL)"
            )
        if "cache" not in kwargs:
            kwargs["cache"] = self._cache()
        if "checksum" not in kwargs:
            kwargs["checksum"] = _config("partition_store_checksum") or DEFAULT_CHECKSUM
            try:
                check_algorithm(kwargs["checksum"])
            except ValueError as exc:
                raise ValueError(f"[{CONFIG_SECTION}] partition_store_checksum: {exc}") from None
        kwargs.setdefault("retention", _seconds("partition_store_retention", DEFAULT_RETENTION))
        kwargs.setdefault("orphan_grace", _seconds("partition_store_orphan_grace", DEFAULT_ORPHAN_GRACE))
        # Unsafe: write even where the endpoint ignores If-None-Match / If-Match (no fencing).
        unconditional = config_flag("partition_store_allow_unconditional_writes")
        kwargs.setdefault("allow_unconditional_writes", unconditional)
        if self.aws_conn_id:  # error hints name the connection to fix (never its secrets)
            kwargs.setdefault("credentials", f"the AWS connection {self.aws_conn_id!r}")
        return S3PartitionStore(self.get_client, url, **kwargs)

    def _cache(self) -> LocalPartitionCache | None:
        """The task-local cache (``partition_store_cache_dir``), bounded by ``partition_store_cache_max_size``
        and ``partition_store_cache_max_age`` (``none`` for no bound)."""
        root = self.cache_dir or _config("partition_store_cache_dir")
        if not root:
            return None
        from airflow_ft_provider.checkpoints.config import parse_size

        size, age = _config("partition_store_cache_max_size"), _config("partition_store_cache_max_age")
        max_bytes: int | None = DEFAULT_CACHE_MAX_BYTES
        if size and size.strip().lower() == "none":
            max_bytes = None
        elif size:
            try:
                max_bytes = parse_size(size, repr(size))
            except ValueError as exc:
                raise ValueError(f"[{CONFIG_SECTION}] partition_store_cache_max_size: {exc}") from None
        max_age: float | None = DEFAULT_CACHE_MAX_AGE
        if age and age.strip().lower() == "none":
            max_age = None
        elif age:
            max_age = _seconds("partition_store_cache_max_age", DEFAULT_CACHE_MAX_AGE)
            if max_age <= 0:
                raise ValueError(
                    f"[{CONFIG_SECTION}] partition_store_cache_max_age must be > 0 s (or none), got {age!r}"
                )
        return LocalPartitionCache(root, max_bytes=max_bytes, max_age=max_age)

    def test_connection(self) -> tuple[bool, str]:
        """For the UI's Test button: can we reach the store's bucket with these credentials?"""
        try:
            self.get_store().check_connection()
        except (PartitionStoreError, ValueError) as exc:
            return False, str(exc)
        return True, "partition store bucket is reachable"


def pipeline_store(description: PipelineDescription, *, retention: float | None = None) -> S3PartitionStore:
    """The store a pipeline names (its URL, else ``[ft_provider] partition_store_url``), reached through
    the pipeline's aws connection; ``retention``: the pipeline's own, if it sets one."""
    kwargs = {} if retention is None else {"retention": retention}
    return PartitionStoreHook(description.aws_conn_id, url=description.store).get_store(**kwargs)


def sweep_limits() -> SweepLimits:
    """``partition_store_sweep_interval`` and ``partition_store_sweep_max_runs``; ValueError naming the
    key and the value if either is invalid."""
    every = _seconds("partition_store_sweep_interval", DEFAULT_SWEEP_EVERY)
    raw = _config("partition_store_sweep_max_runs")
    try:
        most = DEFAULT_SWEEP_MAX_RELEASES if raw in (None, "") else int(str(raw).strip())
        return SweepLimits(every=every, max_releases=most)
    except ValueError:
        raise ValueError(
            f"[{CONFIG_SECTION}] partition_store_sweep_max_runs must be a whole number >= 1, got {raw!r}"
        ) from None


def _config(key: str) -> str | None:
    from airflow.sdk import conf

    return conf.get(CONFIG_SECTION, key, fallback=None)


def config_flag(key: str, *, default: bool = False) -> bool:
    """A boolean ``[ft_provider]`` setting; a value Airflow cannot read as one is an error naming the key."""
    from airflow.sdk import conf

    try:
        return conf.getboolean(CONFIG_SECTION, key, fallback=default)
    except Exception:  # AirflowConfigException (its module moves between Airflow versions)
        raise ValueError(f"[{CONFIG_SECTION}] {key} must be True or False, got {_config(key)!r}") from None


def _seconds(key: str, default: float) -> float:
    from airflow_ft_provider.failover.durations import parse_duration

    value = _config(key)
    if value in (None, ""):
        return default
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"[{CONFIG_SECTION}] {key}: {exc}") from None


EXECUTOR_CREDENTIALS = "executor_credentials"  # [ft_provider]: "connection" (default) or "executor"
EXECUTOR_ENDPOINT_EXTRA = "executor_endpoint_url"  # the aws connection's extra: the executors' endpoint


def executor_access(
    store: S3PartitionStore, aws_conn_id: str | None
) -> tuple[StoreAccess, StoreCredentials | None]:
    """How Spark's executors reach ``store``: its endpoint and region, and the connection's credentials
    (frozen for the try: an assumed role's are valid for its session), unless ``[ft_provider]
    executor_credentials = executor``: then the executors use their own (an instance or pod role),
    and no secret leaves the Airflow worker."""
    meta = store.client.meta
    hook = PartitionStoreHook(aws_conn_id)
    # The executors' own way to the store, when not the worker's (a VPC endpoint, another network)
    endpoint = hook.conn_config.extra_config.get(EXECUTOR_ENDPOINT_EXTRA) or meta.endpoint_url
    if endpoint and (urllib.parse.urlparse(endpoint).hostname or "").endswith(".amazonaws.com"):
        endpoint = None  # AWS itself: the executors find the region's endpoint
    access = StoreAccess(endpoint=endpoint, region=meta.region_name)
    mode = (_config(EXECUTOR_CREDENTIALS) or "connection").strip().lower()
    if mode == "executor":
        return access, None
    if mode != "connection":
        raise ValueError(
            f"[{CONFIG_SECTION}] {EXECUTOR_CREDENTIALS} must be 'connection' (the executors get the "
            f"partition store connection's credentials) or 'executor' (they use their own role), got {mode!r}"
        )
    found = hook.get_session().get_credentials()
    if found is None:
        return access, None
    frozen = found.get_frozen_credentials()
    return access, StoreCredentials(frozen.access_key, frozen.secret_key, frozen.token or None)
