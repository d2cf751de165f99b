"""The two-stage pipeline on a real Spark standalone cluster (master + worker), run with dag.test().

generate --orders--> revenue        (each stage: spark-submit --master spark://127.0.0.1:PORT)
"""

import json
from pathlib import Path

import httpx
import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.partitions.parquet import read_table
from tests.apps.orders_data import daily_revenue, orders

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.airflow]

HERE = Path(__file__).parent
DAG_ID = "ft_cluster_two_stages"


def test_two_stage_pipeline_runs_on_the_standalone_cluster(
    dag_test_home, spark_standalone_cluster, s3_bucket, tmp_path
):
    cluster = spark_standalone_cluster
    dag_file = dag_test_home.add_dag(HERE / "dags" / "ft_spark_cluster.py")
    env = {
        "FT_TEST_APPS": str(HERE.parents[1] / "apps"),
        "FT_TEST_STORE_URL": s3_bucket.url,
        "FT_TEST_MARKERS": str(tmp_path),
        # As a connection made in the UI: type spark, host with the scheme, port apart.
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {"conn_type": "spark", "host": "spark://127.0.0.1", "port": cluster.port}
        ),
    }
    result = dag_test_home.run(dag_file, DAG_ID, env=env)
    assert result.state == "success", result.output[-6000:]
    assert f"--master {cluster.url}" in result.output  # SparkSubmitHook built the master from the connection

    # The data, row by row.
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url)
    run = RunRef(DAG_ID, result.run_id)
    rows = orders()
    generated = read_table(store, run.parse("orders")).to_pylist()
    assert sorted(generated, key=lambda r: r["order_id"]) == rows
    counts = {}
    for row in rows:
        counts[row["day"]] = counts.get(row["day"], 0) + 1
    table = read_table(store, run.parse("revenue"))
    revenue = {r["day"]: (r["revenue"], r["orders"]) for r in table.to_pylist()}
    assert revenue == {day: (total, counts[day]) for day, total in daily_revenue(rows).items()}
    assert (tmp_path / "ran-revenue").exists()

    # The applications really ran on the cluster: the master lists them as finished, and the worker
    # started their executors (one app-* directory each in its SPARK_WORKER_DIR).
    apps = httpx.get(f"{cluster.master_web_ui}/json/", timeout=10).json()
    ours = {app["name"]: app for app in apps["completedapps"] if app["name"].startswith(f"{DAG_ID}.")}
    assert set(ours) == {f"{DAG_ID}.generate", f"{DAG_ID}.revenue"}, apps
    assert {app["state"] for app in ours.values()} == {"FINISHED"}
    executors = {d.name for d in cluster.work_dir.iterdir() if d.is_dir()}
    worker_log = cluster.worker_log.read_text()[-3000:]
    assert {app["id"] for app in ours.values()} <= executors, (executors, worker_log)


def test_stages_on_a_spark_connect_server_of_the_standalone_cluster(
    dag_test_home, spark_standalone_cluster, s3_bucket, tmp_path
):
    #   [ generate[0] ~~orders[0]~~> revenue[0] ]--+
    #   [ generate[1] ~~orders[1]~~> revenue[1] ]--+--revenue--> total      on a Connect server
    #   whose master is the standalone cluster: its executors run on the cluster's worker
    from ft_harness.services.spark_connect import SparkConnectServer

    cluster = spark_standalone_cluster
    dag_file = dag_test_home.add_dag(HERE / "dags" / "ft_spark_pipelines.py")
    with SparkConnectServer(master=cluster.url, log_dir=tmp_path) as server:
        env = {
            "FT_TEST_APPS": str(HERE.parents[1] / "apps"),
            "FT_TEST_STORE_URL": s3_bucket.url,
            "FT_TEST_MARKERS": str(tmp_path),
            **server.connection_env("spark_connect_test"),
        }
        result = dag_test_home.run(dag_file, "ft_connect", env=env)
        apps = httpx.get(f"{cluster.master_web_ui}/json/", timeout=10).json()
    assert result.state == "success", result.output[-6000:]
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url)
    totals = read_table(store, RunRef("ft_connect", result.run_id).parse("revenue_total")).to_pylist()
    assert {r["day"]: r["revenue"] for r in totals} == daily_revenue(orders())
    # One application -- the Connect server -- ran on the cluster, with an executor on its worker.
    running = [app for app in apps["activeapps"] if app["name"] != "" and app["state"] == "RUNNING"]
    assert len(running) == 1, apps
    executors = {d.name for d in cluster.work_dir.iterdir() if d.is_dir()}
    assert running[0]["id"] in executors, (executors, apps)
