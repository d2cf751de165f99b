"""S3 endpoints that ignore conditional writes are found before the first write, and refused.

    client --> HeaderStrippingProxy (drops If-Match / If-None-Match, signs again) --> moto server
    client --------------------------------------------------------------------> moto server

Through the proxy every conditional PUT succeeds: what an S3-compatible store that ignores the
conditions does. Without the probe a zombie commit would win and journal updates would be lost.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from airflow_ft_provider.partitions import PartitionRef, Producer, S3PartitionStore
from airflow_ft_provider.partitions.conditional import (
    PROBE_DIR,
    ConditionalJsonStore,
    ConditionalWritesUnsupported,
)
from ft_harness.data.partition_files import RUN_ID, read_all, version_files, write_files
from ft_harness.services.header_proxy import HeaderStrippingProxy

pytestmark = pytest.mark.s3

REF = PartitionRef("etl", RUN_ID, "orders", 0)


@pytest.fixture
def proxy(s3_endpoint) -> Iterator[HeaderStrippingProxy]:
    proxy = HeaderStrippingProxy(
        s3_endpoint.url,
        access_key=s3_endpoint.access_key,
        secret_key=s3_endpoint.secret_key,
        region=s3_endpoint.region,
    )
    yield proxy
    proxy.close()


def put_calls(client) -> list[str]:
    """Keys of the PutObject calls ``client`` makes from now on."""
    calls: list[str] = []
    client.meta.events.register(
        "before-parameter-build.s3.PutObject", lambda params, **kw: calls.append(params["Key"])
    )
    return calls


def test_the_moto_server_passes_the_probe_once_per_bucket(s3_bucket, tmp_path):
    client = s3_bucket.client()
    calls = put_calls(client)
    store = S3PartitionStore(client, s3_bucket.url + "store/")
    store.commit(REF, write_files(tmp_path / "v1", version_files(1)), producer=Producer("p", 0, 1))
    # A second store and a journal-style update on the same endpoint and bucket: no second probe.
    S3PartitionStore(client, s3_bucket.url + "other/").commit(
        REF, write_files(tmp_path / "v2", version_files(2)), producer=Producer("p", 0, 2)
    )
    store.json_objects.update(s3_bucket.prefix + "store/state.json", lambda cur: {"n": 1})
    probes = [k for k in calls if PROBE_DIR in k]
    assert len(probes) == 4 and len(set(probes)) == 1  # create, create again, stale If-Match, right If-Match
    assert probes[0].startswith(s3_bucket.prefix + "store/" + PROBE_DIR)  # under the store's prefix
    assert not [k for k in s3_bucket.keys() if PROBE_DIR in k]  # and removed
    assert read_all(store.fetch(REF, tmp_path / "out").paths) == version_files(1)


def test_a_store_that_ignores_conditional_writes_is_refused_before_anything_is_written(
    s3_bucket, proxy, tmp_path
):
    store = S3PartitionStore(s3_bucket.client(endpoint_url=proxy.url), s3_bucket.url + "store/")
    with pytest.raises(ConditionalWritesUnsupported) as excinfo:
        store.commit(REF, write_files(tmp_path / "v1", version_files(1)), producer=Producer("p", 0, 1))
    message = str(excinfo.value)
    for words in (
        f"the S3 endpoint {proxy.url} ignores conditional writes on bucket {s3_bucket.name}",
        "If-None-Match: * replaced an existing object instead of answering 412 Precondition Failed",
        "If-Match: <another ETag> replaced the object",
        "[ft_provider] partition_store_allow_unconditional_writes = True",
    ):
        assert words in message
    assert s3_bucket.endpoint.secret_key not in message
    assert proxy.stripped["If-None-Match"] and proxy.stripped["If-Match"]
    assert s3_bucket.keys() == {}  # no data uploaded, the probe object removed

    # The verdict is kept for the process: the journal's compare-and-swap is refused too, at once.
    stripped = sum(proxy.stripped.values())
    with pytest.raises(ConditionalWritesUnsupported):
        store.json_objects.update(s3_bucket.prefix + "store/state.json", lambda cur: {"n": 1})
    with pytest.raises(ConditionalWritesUnsupported):
        ConditionalJsonStore(s3_bucket.client(endpoint_url=proxy.url), s3_bucket.name).create("x.json", {})
    assert sum(proxy.stripped.values()) == stripped
    assert s3_bucket.keys() == {}


def test_the_unsafe_setting_writes_anyway_with_a_warning(s3_bucket, proxy, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="airflow_ft_provider.partitions.conditional")
    store = S3PartitionStore(
        s3_bucket.client(endpoint_url=proxy.url), s3_bucket.url + "store/", allow_unconditional_writes=True
    )
    store.commit(REF, write_files(tmp_path / "v1", version_files(1)), producer=Producer("p", 0, 1))
    assert read_all(store.fetch(REF, tmp_path / "out").paths) == version_files(1)
    assert f"the S3 endpoint {proxy.url} ignores conditional writes" in caplog.text
    assert "partition_store_allow_unconditional_writes is on" in caplog.text
    # Why it is unsafe: an update based on a stale version now silently replaces a newer one.
    objects = store.json_objects
    key = s3_bucket.prefix + "store/state.json"
    stale = objects.create(key, {"n": 1})
    objects.replace(key, {"n": 2}, stale)
    objects.replace(key, {"n": 99}, stale)  # on S3 this is a ConditionalWriteConflict
    assert objects.get(key).value == {"n": 99}


def test_the_hook_reads_the_unsafe_setting(monkeypatch, s3_bucket, proxy):
    import json

    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    endpoint = s3_bucket.endpoint
    monkeypatch.setenv(
        "AIRFLOW_CONN_FT_S3_PROXIED",
        json.dumps(
            {
                "conn_type": "aws",
                "login": endpoint.access_key,
                "password": endpoint.secret_key,
                "extra": {"endpoint_url": proxy.url, "region_name": endpoint.region},
            }
        ),
    )
    hook = PartitionStoreHook("ft_s3_proxied", url=s3_bucket.url + "hooked/")
    assert hook.get_store().allow_unconditional_writes is False
    with pytest.raises(ConditionalWritesUnsupported, match="ignores conditional writes"):
        hook.get_store().json_objects.create(s3_bucket.prefix + "hooked/x.json", {})
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_ALLOW_UNCONDITIONAL_WRITES", "True")
    store = hook.get_store()
    assert store.allow_unconditional_writes is True
    store.json_objects.create(s3_bucket.prefix + "hooked/x.json", {"ok": 1})
    assert store.json_objects.get(s3_bucket.prefix + "hooked/x.json").value == {"ok": 1}


def test_probe_errors_that_are_not_about_conditions_are_raised_and_not_remembered(s3_bucket, tmp_path):
    from airflow_ft_provider.partitions import PartitionStoreError

    bad = s3_bucket.client(aws_secret_access_key="not-the-secret-key")
    with pytest.raises(PartitionStoreError, match="SignatureDoesNotMatch") as excinfo:
        S3PartitionStore(bad, s3_bucket.url + "store/").commit(
            REF, write_files(tmp_path / "v1", version_files(1)), producer=Producer("p", 0, 1)
        )
    assert type(excinfo.value) is PartitionStoreError
    # Same endpoint and bucket, good keys: the probe runs (and passes) instead of a cached failure.
    S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/").commit(
        REF, write_files(tmp_path / "v1", version_files(1)), producer=Producer("p", 0, 1)
    )
