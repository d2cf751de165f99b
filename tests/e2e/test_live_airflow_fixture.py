"""The live-Airflow fixture itself: a DAG file added to the running instance is picked up and runs."""

from __future__ import annotations

import textwrap
import time

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]


def test_new_dag_file_is_picked_up_and_runs(live_airflow, tmp_path):
    dag_id = f"ft_e2e_added_{int(time.time())}"
    src = tmp_path / f"{dag_id}.py"
    src.write_text(
        textwrap.dedent(f"""
        from airflow.sdk import DAG, task

        with DAG(dag_id="{dag_id}", schedule=None, catchup=False):
            @task
            def hello(**context):
                return context["dag_run"].conf.get("x")

            hello()
    """)
    )
    t0 = time.monotonic()
    live_airflow.add_dag_file(src)
    live_airflow.wait_for_dags([dag_id], timeout=90)
    parsed_after = time.monotonic() - t0
    api = live_airflow.client
    assert api.get_dag(dag_id)["is_paused"] is False  # unpaused at creation
    run = api.trigger_dag_run(dag_id, conf={"x": 42})
    final = api.wait_for_dag_run(dag_id, run["dag_run_id"], timeout=120)
    print(f"\n[fixture] new DAG file parsed after {parsed_after:.1f}s; run {final['state']}")
    assert final["state"] == "success", live_airflow.describe_run(dag_id, run["dag_run_id"])
    assert api.xcom_entries(dag_id, run["dag_run_id"], "hello") == {"return_value": 42}
