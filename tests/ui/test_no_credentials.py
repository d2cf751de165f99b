"""No credential of the ``airflow_api`` or the AWS connection anywhere a user or an operator can look.

After pipeline runs with failures in the live Airflow -- ``seed002_b_lost``, whose failover clears B and
D through the REST API with the ``airflow_api`` connection, and ``seed002_c_fails``, restarted from the
failover page by tests/ui/test_failover_ui.py -- it reads every task log and component log of the
instance, every XCom value of those runs, every object of the partition stores in S3 (journal events and
state, stored pipelines, manifests) and the failover pages, and looks for the service account's password
and the S3 secret key.

    A --a--> B --b--> C          (seed 002, all blocking; b_lost: a file of b is deleted before C
               \\--b--> D          reads it, so B, C and D restart; A does not)
"""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

DAG = "ft_e2e_seed002"


@pytest.fixture(scope="module")
def runs(live_airflow, scenario_runs) -> dict[str, str]:
    started = scenario_runs.start(["seed002_b_lost", "seed002_c_fails"])
    for dag_id, run_id in started.values():
        final = live_airflow.client.wait_for_dag_run(dag_id, run_id, timeout=900)
        assert final["state"] == "success", live_airflow.describe_run(dag_id, run_id)
    return {name: run_id for name, (_, run_id) in started.items()}


def s3_objects(s3_endpoint, store_url: str) -> dict[str, str]:
    bucket, _, prefix = store_url[len("s3://") :].partition("/")
    client = s3_endpoint.client()
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", ()):
            if item["Size"] <= 4 * 1024 * 1024:
                body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                found[f"s3://{bucket}/{item['Key']}"] = body.decode("utf-8", errors="replace")
    return found


def test_the_runs_used_the_rest_api_and_no_credential_shows_anywhere(
    live_airflow, runs, s3_endpoint, e2e_store_url
):
    api = live_airflow.client
    # The failover of b_lost did log in with the airflow_api connection and clear B and D.
    clears = [
        e["owner"]
        for e in api.event_logs(DAG, run_id=runs["seed002_b_lost"])
        if e["event"] == "post_clear_task_instances"
    ]
    assert clears and set(clears) == {live_airflow.service_username}

    places: dict[str, str] = {}
    for path in sorted(
        p
        for p in live_airflow.home.rglob("*")
        if p.is_file() and p.suffix in (".log", ".json") and "passwords" not in p.name
    ):
        places[str(path)] = path.read_text(errors="replace")
    assert any("/logs/" in where for where in places) and any("component-logs" in where for where in places)
    for name, run_id in runs.items():
        for ti in api.task_instances(DAG, run_id):
            xcoms = api.xcom_entries(DAG, run_id, ti["task_id"], ti["map_index"])
            places[f"XCom of {name}/{ti['task_id']}"] = repr(xcoms)
            places[f"REST task log of {name}/{ti['task_id']}"] = api.task_log(
                DAG, run_id, ti["task_id"], ti["try_number"], map_index=ti["map_index"]
            )
    places.update(s3_objects(s3_endpoint, e2e_store_url))
    assert any("/_failover/events/" in where for where in places)
    token = api.get_token()
    with httpx.Client(
        base_url=live_airflow.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as web:
        places["failover runs list"] = web.get("/ft-failover/api/runs").text
        for run_id in runs.values():
            for path in (
                f"/ft-failover/runs/{DAG}/{quote(run_id, safe='')}",
                f"/ft-failover/api/runs/{DAG}/{quote(run_id, safe='')}",
            ):
                response = web.get(path)
                assert response.status_code == 200, response.text
                places[f"{path}"] = response.text

    secrets = {
        "the airflow_api password": live_airflow.service_password,
        "the S3 secret key": s3_endpoint.secret_key,
    }
    leaks = [
        f"{what} in {where}"
        for where, text in places.items()
        for what, secret in secrets.items()
        if secret in text
    ]
    assert leaks == [], f"{len(leaks)} leaks in {len(places)} places:\n" + "\n".join(leaks[:40])
