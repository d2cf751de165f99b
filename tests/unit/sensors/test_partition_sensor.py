"""PartitionSensor: poke against the S3 test endpoint, the deferral hand-off, and a dag.test() run.

produce --orders (committed later)--> wait (deferrable PartitionSensor) --> wait_never (times out)
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, TaskDeferred

from airflow_ft_provider.partitions import Producer, RunRef, S3PartitionStore, commit_table
from airflow_ft_provider.sensors.partition import PartitionSensor
from airflow_ft_provider.triggers.partition import PartitionTrigger
from ft_harness.data.partition_files import RUN_ID

pytestmark = pytest.mark.s3

HERE = Path(__file__).parent
CONN_ID = "ft_sensor_s3"
PIPELINE = "producer_dag"


@pytest.fixture
def store(monkeypatch, s3_bucket):
    endpoint = s3_bucket.endpoint
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps(
            {
                "conn_type": "aws",
                "login": endpoint.access_key,
                "password": endpoint.secret_key,
                "extra": {"endpoint_url": endpoint.url, "region_name": endpoint.region},
            }
        ),
    )
    return S3PartitionStore(s3_bucket.client(), s3_bucket.url)


def commit(store, pid, pipeline=PIPELINE, run_id=RUN_ID):
    ref = RunRef(pipeline, run_id).parse(pid)
    commit_table(store, ref, [{"order_id": 1, "amount": 2.5}], producer=Producer("produce", ref.map_index, 1))


def sensor(store, **kwargs):
    kwargs.setdefault("task_id", "wait")
    kwargs.setdefault("pipeline", PIPELINE)
    kwargs.setdefault("partitions", ["orders", "totals[1]"])
    return PartitionSensor(store_url=store.layout.url, aws_conn_id=CONN_ID, **kwargs)


def test_poke_is_false_until_every_partition_is_committed(store, capsys):
    wait = sensor(store, deferrable=False)
    context = {"run_id": RUN_ID}
    assert not wait.poke(context)
    commit(store, "orders")
    assert not wait.poke(context)
    logged = capsys.readouterr().out  # the task logger (structlog) writes to stdout here
    assert "waiting for 1 of 2 partitions" in logged and "totals[1]: missing manifest" in logged
    commit(store, "totals[1]")
    result = wait.poke(context)
    assert result and result.xcom_value == ["orders", "totals[1]"]


def test_poke_defaults_to_this_dag_and_this_run_and_checks_the_run_id(store):
    with DAG("consumer_dag", schedule=None, start_date=datetime(2026, 1, 1)):
        wait = PartitionSensor(
            task_id="wait", partitions="orders", store_url=store.layout.url, aws_conn_id=CONN_ID
        )
    commit(store, "orders", pipeline="consumer_dag", run_id="run_a")
    assert wait.poke({"run_id": "run_a"})
    assert not wait.poke({"run_id": "run_b"})  # another run of the same DAG: not there
    with pytest.raises(ValueError, match="invalid partition id"):
        sensor(store, partitions=["orders[x]"]).poke({"run_id": RUN_ID})


def test_deep_check_sees_a_corrupted_object(store):
    commit(store, "orders")
    ref = RunRef(PIPELINE, RUN_ID).parse("orders")
    entry = store.manifest(ref).files[0]
    key = store.layout.partition_prefix(ref) + entry.key
    body = store.client.get_object(Bucket=store.bucket, Key=key)["Body"].read()
    store.client.put_object(Bucket=store.bucket, Key=key, Body=bytes([body[0] ^ 1]) + body[1:])  # same size
    context = {"run_id": RUN_ID}
    assert sensor(store, partitions=["orders"]).poke(context)
    assert not sensor(store, partitions=["orders"], deep_check=True).poke(context)


def test_poke_mode_execute_returns_the_partitions_or_times_out(store):
    commit(store, "orders")
    assert sensor(store, partitions=["orders"], deferrable=False).execute({"run_id": RUN_ID}) == ["orders"]
    late = sensor(store, partitions=["totals"], deferrable=False, poke_interval=0.2, timeout=0.5)
    with pytest.raises(AirflowSensorTimeout):
        late.execute({"run_id": RUN_ID})


def test_deferrable_execute_defers_to_the_trigger_only_when_something_is_missing(store):
    wait = sensor(store, deferrable=True, poke_interval=5, timeout=120, deep_check=True)
    before = time.time()
    with pytest.raises(TaskDeferred) as deferred:
        wait.execute({"run_id": RUN_ID})
    trigger = deferred.value.trigger
    assert isinstance(trigger, PartitionTrigger) and deferred.value.method_name == "execute_complete"
    _, kwargs = trigger.serialize()
    assert kwargs | {"timeout_at": None} == {
        "pipeline": PIPELINE,
        "run_id": RUN_ID,
        "partitions": ["orders", "totals[1]"],
        "store_url": store.layout.url,
        "aws_conn_id": CONN_ID,
        "region_name": None,
        "poke_interval": 5.0,
        "timeout_at": None,
        "deep_check": True,
    }
    assert before + 120 <= kwargs["timeout_at"] <= time.time() + 120
    # The scheduler's deferral timeout is a backstop behind the trigger's own deadline.
    assert deferred.value.timeout.total_seconds() > 120

    commit(store, "orders")
    commit(store, "totals[1]")
    assert wait.execute({"run_id": RUN_ID}) == ["orders", "totals[1]"]  # available: no deferral


def test_execute_complete_turns_each_event_into_the_right_outcome(store):
    wait = sensor(store, deferrable=True, timeout=30)
    context = {"run_id": RUN_ID}
    assert wait.execute_complete(context, {"status": "success", "partitions": ["orders"]}) == ["orders"]

    with pytest.raises(AirflowSensorTimeout, match=r"after 30 s: totals\[1\]: missing manifest"):
        wait.execute_complete(context, {"status": "timeout", "missing": {"totals[1]": "missing manifest"}})

    message = "S3 ListObjectsV2 on s3://lake/p/ failed with AccessDenied"
    with pytest.raises(AirflowException, match=message) as failed:
        wait.execute_complete(context, {"status": "error", "message": message})
    assert not isinstance(failed.value, AirflowSensorTimeout)

    with pytest.raises(AirflowException, match="unexpected event"):
        wait.execute_complete(context, {"status": "???"})


def test_soft_fail_turns_a_timeout_event_into_a_skip(store):
    from airflow.sdk.exceptions import AirflowSkipException

    wait = sensor(store, deferrable=True, soft_fail=True)
    with pytest.raises(AirflowSkipException):
        wait.resume_execution(
            "execute_complete", {"event": {"status": "timeout", "missing": {}}}, {"run_id": RUN_ID}
        )


@pytest.mark.airflow
def test_deferrable_sensor_in_dag_test_waits_for_a_partition_committed_later(dag_test_home, s3_bucket):
    #   produce --(commits 'orders' in the background, 5 s later)--> wait (deferrable) --> wait_never
    dag_file = dag_test_home.add_dag(HERE / "dags" / "ft_partition_sensor.py")
    result = dag_test_home.run(dag_file, "ft_partition_sensor", env={"FT_TEST_STORE_URL": s3_bucket.url})
    states = {ti["task_id"]: ti["state"] for ti in result.tasks}
    assert states == {"produce": "success", "wait": "success", "wait_never": "failed"}, result.output[-5000:]
    # The sensor deferred: its first poke missed, the trigger ran inline and saw the commit.
    assert "waiting for 1 of 1 partitions of run ft_partition_sensor/" in result.output
    assert "running trigger in line" in result.output
    assert result.task("wait")["try_number"] == 1
    # The second sensor's trigger timed out and the sensor turned that into AirflowSensorTimeout.
    assert "AirflowSensorTimeout" in result.output and "never: missing manifest" in result.output
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url)
    assert store.manifest(RunRef("ft_partition_sensor", result.run_id).parse("orders")).row_count == 3


def test_the_sensor_is_an_aws_base_sensor_whose_hook_is_the_store_hook(store):
    # Like S3KeySensor: the AWS arguments (templated) reach the hook, the store URL too.
    from airflow.providers.amazon.aws.sensors.base_aws import AwsBaseSensor

    from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

    wait = sensor(store, region_name="eu-west-1", verify=False)
    assert isinstance(wait, AwsBaseSensor) and isinstance(wait.hook, PartitionStoreHook)
    assert {"aws_conn_id", "region_name", "verify", "store_url"} <= set(wait.template_fields)
    assert (wait.hook.region_name, wait.hook.verify, wait.hook.url) == ("eu-west-1", False, store.layout.url)
