"""SparkStageOperator in real local Spark, committing to the S3 test endpoint, run with dag.test()."""

import re
from pathlib import Path

import pytest

from airflow_ft_provider.partitions import PartitionNotFound, RunRef, S3PartitionStore
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.partitions.pipelined import PipelinedPartitions
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.data.journal_records import stored_events
from tests.apps.orders_data import daily_revenue, orders

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.airflow]

HERE = Path(__file__).parent


@pytest.fixture
def pipelines(dag_test_home, s3_bucket, tmp_path):
    """The test DAG file in the dags folder, pointed at a fresh bucket; yields (run, store, markers)."""
    dag_file = dag_test_home.add_dag(HERE / "dags" / "ft_spark_pipelines.py")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {
        "FT_TEST_APPS": str(HERE.parents[1] / "apps"),
        "FT_TEST_STORE_URL": s3_bucket.url,
        "FT_TEST_MARKERS": str(markers),
    }
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url)

    def run(dag_id, conf=None, **settings):
        return dag_test_home.run(dag_file, dag_id, conf, env={**env, **settings})

    return run, store, markers


def revenue_rows(store, dag_id, run_id, partition_id):
    table = read_table(store, RunRef(dag_id, run_id).parse(partition_id))
    return {row["day"]: (row["revenue"], row["orders"]) for row in table.to_pylist()}


def expected_revenue(rows):
    counts = {}
    for row in rows:
        counts[row["day"]] = counts.get(row["day"], 0) + 1
    return {day: (total, counts[day]) for day, total in daily_revenue(rows).items()}


def test_two_stage_pipeline_commits_and_second_stage_reads_the_first(pipelines):
    #   generate --orders--> revenue
    run, store, _ = pipelines
    result = run("ft_two_stages")
    assert result.state == "success", result.errors()
    rows = orders()
    generated = read_table(store, RunRef("ft_two_stages", result.run_id).parse("orders")).to_pylist()
    assert sorted(generated, key=lambda r: r["order_id"]) == rows  # row by row
    assert revenue_rows(store, "ft_two_stages", result.run_id, "revenue") == expected_revenue(rows)
    manifest = store.manifest(RunRef("ft_two_stages", result.run_id).parse("revenue"))
    assert (manifest.producer.task_id, manifest.producer.try_number, manifest.row_count) == ("revenue", 1, 5)
    assert manifest.compression == "snappy"


def test_missing_input_raises_partition_not_found_before_submitting(pipelines, spark_connect):
    #   generate --orders--> [one data object deleted] --> revenue      (on the Spark Connect server: the
    #   check comes before either backend is asked to run anything; submit mode has the same code path)
    run, store, markers = pipelines
    result = run("ft_missing_input", **spark_connect.connection_env())
    assert result.task("generate")["state"] == "success"
    assert result.task("revenue")["state"] == "failed"
    assert "PartitionNotFound" in result.output and "orders" in result.output
    assert not (markers / "ran-revenue").exists(), "the Spark application must not be submitted"
    with pytest.raises(PartitionNotFound):
        store.manifest(RunRef("ft_missing_input", result.run_id).parse("revenue"))


def test_failing_application_commits_nothing(pipelines, s3_bucket):
    run, store, _ = pipelines
    result = run("ft_failing_app")
    assert result.task("broken")["state"] == "failed"
    events = stored_events(RecoveryJournal(store, RunRef("ft_failing_app", result.run_id)))
    assert [e["reason"] for e in events] == ["Recovery is suppressed by NoRestart()"]
    # the app failed, and its driver told why (spark/failure_report.py)
    assert events[0]["cause"] == (
        "DriverFailure: the Spark driver failed: RuntimeError: injected failure after writing 'first'"
    )
    written = [key for key in s3_bucket.keys() if "ft_failing_app" in key]
    assert not [key for key in written if "/blocking/" in key or "/scratch/" in key], (
        "no partition data may be written"
    )
    assert any("/_failover/events/" in key for key in written)  # the suppressed recovery is on record


def test_mapped_stage_consumed_pointwise_and_all_to_all(pipelines, spark_connect):
    #   shard[0..2] --orders (pointwise)--> shard_revenue[0..2]
    #             \\--orders (all-to-all)--> total_revenue
    # On the Spark Connect server: which partitions a mapped consumer reads is decided before the backend
    # runs (spark-submit reads them the same way: test_two_stage_pipeline..., the pipelined one below).
    run, store, _ = pipelines
    result = run("ft_mapped", **spark_connect.connection_env())
    assert result.state == "success", result.errors()
    for shard in range(3):
        assert revenue_rows(store, "ft_mapped", result.run_id, f"revenue[{shard}]") == expected_revenue(
            orders(shard, 3)
        )
    assert revenue_rows(store, "ft_mapped", result.run_id, "revenue_total") == expected_revenue(orders())


def test_mapped_stages_joined_by_a_pipelined_pointwise_exchange_with_spark_submit(pipelines, s3_bucket):
    #   shard[i] ~~orders[i]~~> shard_revenue[i], i = 0, 1      (pipelined partitions in S3 scratch)
    run, store, _ = pipelines
    result = run("ft_mapped_pipelined")
    assert result.state == "success", result.errors()
    run_ref = RunRef("ft_mapped_pipelined", result.run_id)
    pipelined = PipelinedPartitions(store)
    for shard in range(2):
        assert revenue_rows(
            store, "ft_mapped_pipelined", result.run_id, f"revenue[{shard}]"
        ) == expected_revenue(orders(shard, 2))
        handle = pipelined.resolve(run_ref.parse(f"orders[{shard}]"))
        assert (handle.execution, handle.engine, handle.producer.map_index) == ("t1", None, shard)
        assert re.search(
            rf"committed pipelined partition orders\[{shard}\]: \d+ rows, [1-9]\d* files", result.output
        )
    # The end of the run (its DAG callback, run in-process by dag.test) released the scratch data and
    # started the retention clock.
    assert not [k for k in s3_bucket.keys() if "ft_mapped_pipelined" in k and "/scratch/" in k]
    assert store.layout.marker_key(run_ref, "ended") in s3_bucket.keys()


def test_faults_asked_for_where_fault_injection_is_off_change_nothing(pipelines, spark_connect):
    #   generate --orders--> revenue      every kind of fault asked for; the deployment does not allow it
    #   (stages on the Spark Connect server; the gate is before either backend)
    run, store, markers = pipelines
    faults = [
        {"task": "generate", "mode": "kill"},
        {"task": "generate", "mode": "app"},
        {"task": "revenue", "delete": ["orders"]},
        {"task": "revenue", "truncate": ["orders"]},
        {"task": "revenue", "mode": "raise"},
    ]
    result = run(
        "ft_two_stages",
        {"ft_faults": faults},
        AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION="False",
        **spark_connect.connection_env(),
    )
    # Nothing killed (the dag.test process would have died), no application failed, nothing raised:
    # the run, whose restart strategy is "none", succeeds on the first try of every task.
    assert result.state == "success", result.errors()
    assert [(ti["task_id"], ti["try_number"]) for ti in sorted(result.tasks, key=lambda t: t["task_id"])] == [
        ("generate", 1),
        ("revenue", 1),
    ]
    # Nothing deleted or truncated: the orders partition passes a deep (checksum) check.
    report = store.check_availability("ft_two_stages", result.run_id, ["orders", "revenue"], deep=True)
    assert report.unavailable == {}
    assert result.output.count("ignoring ft_faults in the run's conf: fault injection is off") == 2


def test_stages_on_a_spark_connect_server_keep_pipelined_partitions_in_the_server(
    pipelines, spark_connect, s3_bucket
):
    #   [ generate[0] ~~orders[0]~~> revenue[0] ]--+
    #   [ generate[1] ~~orders[1]~~> revenue[1] ]--+--revenue--> total (python_callable)
    run, store, markers = pipelines
    result = run("ft_connect", **spark_connect.connection_env("spark_connect_test"))
    assert result.state == "success", result.errors()
    assert "Spark-Submit cmd" not in result.output  # no spark-submit, no JVM per stage
    run_ref = RunRef("ft_connect", result.run_id)
    for shard in range(2):
        assert revenue_rows(store, "ft_connect", result.run_id, f"revenue[{shard}]") == expected_revenue(
            orders(shard, 2)
        )
        assert (markers / "ran-revenue").exists()
    totals = read_table(store, run_ref.parse("revenue_total")).to_pylist()
    assert {r["day"]: (r["revenue"], r["orders"]) for r in totals} == expected_revenue(orders())
    # The pipelined partitions never reached S3: each is a view of the server, named in its handle,
    # released by its only consumer once that committed.
    assert not [key for key in s3_bucket.keys() if "ft_connect" in key and "/scratch/" in key]
    pipelined = PipelinedPartitions(store)
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession.builder.remote(spark_connect.url).create()
    try:
        for shard in range(2):
            handle = pipelined.resolve(run_ref.parse(f"orders[{shard}]"))
            assert handle.engine is not None and handle.engine.server == spark_connect.url
            assert handle.consumed_by == (f"revenue[{shard}]",)
            assert not session.catalog.tableExists(f"global_temp.{handle.engine.view}")
    finally:
        session.stop()
