"""PartitionTrigger.run() under asyncio against the S3 test endpoint: success, timeout, errors, serialize.

producer (commit_table, another thread) --orders--> [PartitionTrigger polls the store]
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import time

import pytest

from airflow_ft_provider.partitions import Producer, RunRef, S3PartitionStore, commit_table
from airflow_ft_provider.triggers.partition import PartitionTrigger
from ft_harness.data.partition_files import RUN_ID
from ft_harness.services.s3_server import free_port

pytestmark = pytest.mark.s3

CONN_ID = "ft_trigger_s3"
PIPELINE = "producer_dag"


def set_aws_connection(monkeypatch, endpoint_url, access_key, secret_key, **config_kwargs):
    extra = {"endpoint_url": endpoint_url, "region_name": "us-east-1"}
    if config_kwargs:
        extra["config_kwargs"] = config_kwargs
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps({"conn_type": "aws", "login": access_key, "password": secret_key, "extra": extra}),
    )


@pytest.fixture
def connection(monkeypatch, s3_bucket):
    endpoint = s3_bucket.endpoint
    set_aws_connection(monkeypatch, endpoint.url, endpoint.access_key, endpoint.secret_key)
    return endpoint


def make_trigger(store_url, **overrides):
    kwargs = dict(
        pipeline=PIPELINE,
        run_id=RUN_ID,
        partitions=["orders"],
        store_url=store_url,
        aws_conn_id=CONN_ID,
        poke_interval=0.2,
        timeout_at=time.time() + 30,
    )
    kwargs.update(overrides)
    return PartitionTrigger(**kwargs)


async def all_events(trigger, limit=60.0):
    """Every event run() yields (it must yield exactly one and stop), and how long it took."""
    start = time.monotonic()

    async def collect():
        return [event async for event in trigger.run()]

    events = await asyncio.wait_for(collect(), limit)
    return events, time.monotonic() - start


def commit_orders(store, pid="orders"):
    ref = RunRef(PIPELINE, RUN_ID).parse(pid)
    commit_table(store, ref, [{"order_id": 1, "amount": 9.5}], producer=Producer("produce", ref.map_index, 1))


def test_partition_committed_after_a_delay_fires_success(connection, s3_bucket):
    # The trigger starts while nothing is committed; another thread commits 1 s later.
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url)
    trigger = make_trigger(s3_bucket.url, partitions=["orders", "totals[1]"])

    async def scenario():
        async def commit_later():
            await asyncio.sleep(1.0)
            await asyncio.to_thread(commit_orders, store, "orders")
            await asyncio.to_thread(commit_orders, store, "totals[1]")
            return time.monotonic()

        committer = asyncio.create_task(commit_later())
        events, elapsed = await all_events(trigger)
        return events, elapsed, committer.done() and committer.result(), time.monotonic()

    events, elapsed, committed_at, fired_at = asyncio.run(scenario())
    assert [e.payload for e in events] == [{"status": "success", "partitions": ["orders", "totals[1]"]}]
    assert committed_at and committed_at <= fired_at and elapsed >= 1.0


def test_partition_never_committed_fires_timeout_naming_what_is_missing(connection, s3_bucket):
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url)
    commit_orders(store, "orders")  # one of the two is there
    trigger = make_trigger(s3_bucket.url, partitions=["orders", "totals"], timeout_at=time.time() + 1.0)
    events, elapsed = asyncio.run(all_events(trigger))
    assert len(events) == 1 and events[0].payload["status"] == "timeout"
    missing = events[0].payload["missing"]
    assert list(missing) == ["totals"] and missing["totals"].startswith("missing manifest")
    assert 1.0 <= elapsed < 10


def test_unreachable_endpoint_fires_error_without_raising(monkeypatch, s3_bucket):
    endpoint = s3_bucket.endpoint
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    set_aws_connection(monkeypatch, closed, endpoint.access_key, endpoint.secret_key)
    events, _ = asyncio.run(all_events(make_trigger(s3_bucket.url)))
    assert len(events) == 1 and events[0].payload["status"] == "error"
    message = events[0].payload["message"]
    assert "EndpointConnectionError" in message and closed in message and s3_bucket.name in message
    assert endpoint.secret_key not in message and endpoint.access_key not in message


def test_wrong_secret_fires_error_naming_the_s3_code_not_the_secret(monkeypatch, s3_bucket):
    endpoint = s3_bucket.endpoint
    set_aws_connection(monkeypatch, endpoint.url, endpoint.access_key, "wrong-secret-value-123")
    events, _ = asyncio.run(all_events(make_trigger(s3_bucket.url)))
    assert [e.payload["status"] for e in events] == ["error"]
    message = events[0].payload["message"]
    assert "SignatureDoesNotMatch" in message and "wrong-secret-value-123" not in message


def test_missing_connection_and_store_url_are_error_events(monkeypatch, connection, s3_bucket):
    events, _ = asyncio.run(all_events(make_trigger(s3_bucket.url, aws_conn_id="ft_no_such_conn")))
    assert [e.payload["status"] for e in events] == ["error"]
    assert "ft_no_such_conn" in events[0].payload["message"]

    monkeypatch.delenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL", raising=False)
    events, _ = asyncio.run(all_events(make_trigger(None)))
    assert [e.payload["status"] for e in events] == ["error"]
    assert "no partition store URL" in events[0].payload["message"]


def test_a_silent_endpoint_does_not_block_the_event_loop(monkeypatch, s3_bucket):
    # The endpoint accepts connections and never answers: each poll hangs until the read timeout.
    # Meanwhile a ticker on the same loop must keep running (boto3 runs in a worker thread).
    endpoint = s3_bucket.endpoint
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        set_aws_connection(
            monkeypatch,
            url,
            endpoint.access_key,
            endpoint.secret_key,
            connect_timeout=1,
            read_timeout=3,
            retries={"mode": "standard", "total_max_attempts": 1},
        )

        async def scenario():
            gaps = []

            async def ticker():
                last = time.monotonic()
                while True:
                    await asyncio.sleep(0.05)
                    now = time.monotonic()
                    gaps.append(now - last)
                    last = now

            tick = asyncio.create_task(ticker())
            events, elapsed = await all_events(make_trigger(s3_bucket.url))
            tick.cancel()
            return events, elapsed, gaps

        events, elapsed, gaps = asyncio.run(scenario())
    assert [e.payload["status"] for e in events] == ["error"]
    assert "ReadTimeout" in events[0].payload["message"]
    assert elapsed >= 3 and len(gaps) >= 20
    # boto3 on the loop would block it for the whole 3 s read timeout. Half of that is the bound: a
    # worker thread holding the GIL (botocore parsing its service models) can still delay a tick by a
    # fraction of a second on a loaded 2-core machine (0.76 s seen in CI).
    assert max(gaps) < 1.5, f"the event loop was blocked for {max(gaps):.2f} s"


def test_serialize_returns_exactly_the_constructor_arguments():
    trigger = make_trigger("s3://lake/pipelines/", partitions=["orders", "totals[3]"], deep_check=True)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_ft_provider.triggers.partition.PartitionTrigger"
    assert set(kwargs) == set(inspect.signature(PartitionTrigger).parameters)
    assert json.loads(json.dumps(kwargs)) == kwargs  # plain JSON values

    # Round trip as the triggerer does it: import the class path, build from the (serde) kwargs.
    from airflow.sdk.module_loading import import_string
    from airflow.sdk.serde import deserialize, serialize

    rebuilt = import_string(classpath)(**deserialize(serialize(kwargs)))
    assert rebuilt.serialize() == (classpath, kwargs)
