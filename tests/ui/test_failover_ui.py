"""The UI plugin in a real Airflow: its endpoints behind Airflow's login, the data it shows for a run
that had a region failover, the task links, and a headless Chromium that logs in, reads the page
and restarts a region from it.

    A --a--> B --b--> C          (seed 002, all blocking; C fails once -> only C re-ran)
               \\--b--> D

The tests share the e2e scenario run ``seed002_c_fails`` (checked by tests/e2e first) and go in file
order: the browser test at the end restarts B's region, after which B, C and D (not A) have run again,
cleared by the API server as the logged-in user (Airflow's audit log names them). ``seed002_b_lost`` is
started alongside for tests/ui/test_no_credentials.py.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.airflow.airflow_rest import try_numbers
from ft_harness.data.journal_records import stored_events

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("FT_TEST_ARTIFACTS", REPO / "test-artifacts"))
DAG = "ft_e2e_seed002"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def run_id(live_airflow, scenario_runs):
    """The e2e scenario run of seed 002 where C failed once (shared: ft_harness/chaos/scenario_runs.py)."""
    dag_id, run_id = scenario_runs.start(["seed002_c_fails", "seed002_b_lost"])["seed002_c_fails"]
    assert dag_id == DAG
    run = live_airflow.client.wait_for_dag_run(DAG, run_id, timeout=900)
    assert run["state"] == "success", live_airflow.describe_run(DAG, run_id)
    return run_id


@pytest.fixture(scope="module")
def journal(s3_endpoint, e2e_store_url, run_id):
    return RecoveryJournal(S3PartitionStore(s3_endpoint.client(), e2e_store_url), RunRef(DAG, run_id))


@pytest.fixture(scope="module")
def web(live_airflow):
    with httpx.Client(base_url=live_airflow.base_url, timeout=60) as client:
        yield client


def token(web, username, password) -> str:
    response = web.post("/auth/token", json={"username": username, "password": password})
    assert response.status_code == 201, response.text
    return response.json()["access_token"]


def bearer(value):
    return {"Authorization": f"Bearer {value}"}


@pytest.fixture(scope="module")
def admin(web, live_airflow):
    return bearer(token(web, live_airflow.username, live_airflow.password))


@pytest.fixture(scope="module")
def viewer(web, live_airflow):
    return bearer(token(web, live_airflow.viewer_username, live_airflow.viewer_password))


def tries(live_airflow, run_id):
    return try_numbers(live_airflow.client.task_instances(DAG, run_id))


def endpoints(run_id):
    run = f"{DAG}/{quote(run_id)}"
    return [
        ("GET", "/ft-failover/"),
        ("GET", f"/ft-failover/runs/{run}"),
        ("GET", "/ft-failover/api/runs"),
        ("GET", f"/ft-failover/api/runs/{run}"),
        ("POST", f"/ft-failover/api/runs/{run}/restart"),
    ]


def test_the_plugin_is_registered_with_its_views(web, admin):
    plugins = web.get("/api/v2/plugins", headers=admin).json()["plugins"]
    [plugin] = [p for p in plugins if p["name"] == "ft_failover"]
    assert plugin["fastapi_apps"] == [
        {
            "app": "fastapi.applications.FastAPI",
            "url_prefix": "/ft-failover",
            "name": "Failover (airflow-ft-provider)",
        }
    ]
    views = {v["destination"]: v["href"] for v in plugin["external_views"]}
    assert views == {
        "nav": "/ft-failover/",
        "dag_run": "/ft-failover/runs/{DAG_ID}/{RUN_ID}",
        "task_instance": "/ft-failover/runs/{DAG_ID}/{RUN_ID}?task={TASK_ID}&map_index={MAP_INDEX}",
    }


def test_every_endpoint_refuses_requests_without_a_valid_login(web, live_airflow, run_id, journal):
    before = tries(live_airflow, run_id)
    for method, path in endpoints(run_id):
        kwargs = {"json": {"task": "B"}} if method == "POST" else {}
        assert web.request(method, path, **kwargs).status_code == 401, (method, path)
        forged = web.request(method, path, headers=bearer("not-a-jwt"), **kwargs)
        assert forged.status_code == 403, (method, path, forged.text)
        with httpx.Client(base_url=web.base_url, cookies={"_token": "forged"}) as cookie_client:
            assert cookie_client.request(method, path, **kwargs).status_code == 403, (method, path)
    assert tries(live_airflow, run_id) == before
    assert [e["kind"] for e in stored_events(journal)] == ["failover"]


def test_a_viewer_sees_the_run_but_cannot_restart_a_region(web, viewer, live_airflow, run_id, journal):
    before = tries(live_airflow, run_id)
    assert web.get(f"/ft-failover/api/runs/{DAG}/{run_id}", headers=viewer).status_code == 200
    refused = web.post(f"/ft-failover/api/runs/{DAG}/{run_id}/restart", headers=viewer, json={"task": "B"})
    assert refused.status_code == 403, refused.text
    assert tries(live_airflow, run_id) == before
    assert [e["kind"] for e in stored_events(journal)] == ["failover"]


def test_the_run_data_shows_the_failover_partitions_and_budget(web, admin, run_id, s3_endpoint):
    response = web.get(f"/ft-failover/api/runs/{DAG}/{run_id}", headers=admin)
    assert response.status_code == 200, response.text
    view = response.json()
    assert [r["tasks"] for r in view["regions"]] == [["A"], ["B"], ["C"], ["D"]]
    assert {t["id"]: (t["state"], t["try_number"]) for t in view["tasks"]} == {
        "A": ("success", 1),
        "B": ("success", 1),
        "C": ("success", 2),
        "D": ("success", 1),
    }
    assert {(e["from"], e["to"], e["type"]) for e in view["edges"]} == {
        ("A", "B", "blocking"),
        ("B", "C", "blocking"),
        ("B", "D", "blocking"),
    }

    [event] = view["history"]
    assert (event["kind"], event["task"], event["try_number"], event["regions"], event["delay"]) == (
        "failover",
        "C",
        1,
        [["C"]],
        2.0,
    )
    assert "InjectedFailure" in event["cause"] and event["restart"] is True
    assert event["strategy_state"] == {"type": "fixed-delay", "failures": 1}

    partitions = {p["id"]: p for p in view["partitions"]}
    assert {p: (row["status"], row["rows"], row["producer_try"]) for p, row in partitions.items()} == {
        "a": ("committed", 40, 1),
        "b": ("committed", 40, 1),
        "c": ("committed", 40, 2),
        "d": ("committed", 40, 1),
    }
    assert all(row["size"] > 0 and row["files"] >= 1 and row["attempt"] for row in partitions.values())

    assert view["strategy"]["restart_strategy"] == "FixedDelay(attempts=5, delay=2 s)"
    assert view["strategy"]["scopes"][0]["budget"] == "4 of 5 restarts left (1 failures so far)"
    page = web.get(f"/ft-failover/runs/{DAG}/{run_id}", headers=admin).text
    for secret in (s3_endpoint.access_key, s3_endpoint.secret_key):
        assert secret not in response.text and secret not in page


def test_the_runs_list_and_task_links_lead_to_the_page(web, admin, run_id):
    listed = web.get("/ft-failover/api/runs", headers=admin).json()["runs"]
    assert {"dag_id": DAG, "run_id": run_id} in [{k: r[k] for k in ("dag_id", "run_id")} for r in listed]
    links = web.get(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/B/links", headers=admin).json()
    page = f"/ft-failover/runs/{DAG}/{quote(run_id, safe='')}?task=B"
    assert links["extra_links"] == {"Failover region": f"{page}#regions", "Partitions": f"{page}#partitions"}


def test_bad_restart_requests_are_refused_and_change_nothing(web, admin, live_airflow, run_id, journal):
    before = tries(live_airflow, run_id)
    path = f"/ft-failover/api/runs/{DAG}/{run_id}/restart"
    unknown = web.post(path, headers=admin, json={"task": "Z"})
    assert unknown.status_code == 400 and "'Z' is not a task of pipeline 'ft_e2e_seed002'" in unknown.text
    form = web.post(path, headers=admin, data={"task": "B"})
    assert form.status_code in (415, 422), form.text  # JSON only: no cross-site form posts
    missing = web.get(f"/ft-failover/api/runs/{DAG}/no_such_run", headers=admin)
    assert missing.status_code == 404 and "has no run 'no_such_run'" in missing.text
    assert tries(live_airflow, run_id) == before
    assert [e["kind"] for e in stored_events(journal)] == ["failover"]


def test_a_cookie_authenticated_restart_from_another_site_is_refused(web, live_airflow, run_id, journal):
    """What a page on another site could make a logged-in user's browser send: the session cookie, JSON."""
    before = tries(live_airflow, run_id)
    session = token(web, live_airflow.username, live_airflow.password)
    path = f"/ft-failover/api/runs/{DAG}/{run_id}/restart"
    with httpx.Client(base_url=web.base_url, cookies={"_token": session}, timeout=60) as browser_like:
        for headers in ({"Origin": "https://evil.example"}, {}):  # browsers send Origin with every POST
            refused = browser_like.post(path, json={"task": "B"}, headers=headers)
            assert refused.status_code == 403 and "cross-site request refused" in refused.text, (
                headers,
                refused.text,
            )
        assert browser_like.get(f"/ft-failover/api/runs/{DAG}/{run_id}").status_code == 200  # reading is fine
    assert tries(live_airflow, run_id) == before
    assert [e["kind"] for e in stored_events(journal)] == ["failover"]


def test_a_store_xcom_written_through_the_rest_api_is_not_trusted(web, admin, live_airflow, run_id, journal):
    """Anyone who may edit the DAG's XComs could point ``ft_store`` at another store: the page refuses it."""
    before = tries(live_airflow, run_id)

    def entry(task):
        return f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task}/xcomEntries/ft_store"

    originals = {task: web.get(entry(task), headers=admin).json()["value"] for task in "ABCD"}  # as stored
    try:
        for task in originals:
            patched = web.patch(
                entry(task),
                headers=admin,
                json={"value": {"url": "s3://attacker-bucket/x/", "aws_conn_id": "aws_default"}},
            )
            assert patched.status_code == 200, patched.text
        for response in (
            web.get(f"/ft-failover/api/runs/{DAG}/{run_id}", headers=admin),
            web.post(f"/ft-failover/api/runs/{DAG}/{run_id}/restart", headers=admin, json={"task": "B"}),
        ):
            assert response.status_code == 409 and "s3://attacker-bucket/x/" in response.text, response.text
    finally:
        for task, value in originals.items():
            assert web.patch(entry(task), headers=admin, json={"value": value}).status_code == 200
    assert web.get(f"/ft-failover/api/runs/{DAG}/{run_id}", headers=admin).status_code == 200
    assert tries(live_airflow, run_id) == before
    assert [e["kind"] for e in stored_events(journal)] == ["failover"]


def test_the_pages_may_be_framed_by_airflows_own_origin_only(web, admin, run_id):
    for path in (f"/ft-failover/runs/{DAG}/{run_id}", f"/ft-failover/api/runs/{DAG}/{run_id}"):
        headers = web.get(path, headers=admin).headers
        assert (
            headers["X-Frame-Options"] == "SAMEORIGIN"
            and "frame-ancestors 'self'" in headers["Content-Security-Policy"]
        ), path


@pytest.fixture
def browser(tmp_path):
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail(
            f"{CHROMIUM} and {CHROMEDRIVER} are needed: apt-get install chromium chromium-driver "
            "(scripts/test.sh installs them)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1500,1200",
        f"--user-data-dir={tempfile.mkdtemp(dir=tmp_path)}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def wait_for(driver, condition, timeout=60, what="condition"):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition, message=f"timed out waiting for {what}")


def test_a_browser_logs_in_reads_the_page_and_restarts_a_region(
    browser, live_airflow, run_id, journal, s3_endpoint, e2e_store_url
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    base = live_airflow.base_url
    store = S3PartitionStore(s3_endpoint.client(), e2e_store_url)
    a_before = store.manifest(RunRef(DAG, run_id).parse("a")).attempt_id

    # Log in through Airflow's own login form.
    browser.get(f"{base}/auth/login")
    wait_for(browser, ec.presence_of_element_located((By.NAME, "username")), what="the login form")
    browser.find_element(By.NAME, "username").send_keys(live_airflow.username)
    browser.find_element(By.NAME, "password").send_keys(live_airflow.password + Keys.ENTER)
    wait_for(browser, lambda d: "/auth/login" not in d.current_url, what="the login to finish")

    # The run's "Failover" tab in the Airflow UI shows the plugin page in an iframe.
    browser.get(f"{base}/dags/{DAG}/runs/{quote(run_id, safe='')}/plugin/ft-failover-run")
    frame = wait_for(browser, ec.presence_of_element_located((By.TAG_NAME, "iframe")), what="the plugin tab")
    browser.switch_to.frame(frame)
    wait_for(browser, ec.presence_of_element_located((By.ID, "regions-graph")), what="the regions graph")
    states = {
        t.get_attribute("data-task"): t.get_attribute("data-state")
        for t in browser.find_elements(By.CSS_SELECTOR, "#regions-graph .task")
    }
    assert states == {"A": "success", "B": "success", "C": "success", "D": "success"}
    assert len(browser.find_elements(By.CSS_SELECTOR, "#regions-graph .edge-blocking")) == 3
    partitions = {
        row.get_attribute("data-partition"): row.text
        for row in browser.find_elements(By.CSS_SELECTOR, ".partition-row")
    }
    assert sorted(partitions) == ["a", "b", "c", "d"] and all(
        "committed" in text for text in partitions.values()
    )
    [history] = browser.find_elements(By.CSS_SELECTOR, ".history-row")
    assert "C try 1" in history.text and "InjectedFailure" in history.text and "[C]" in history.text
    assert "injected fault" in history.text  # the failure's labels (ft_faults, recoverable)
    assert "not before" in history.text and "(fixed-delay, restart 1 of 5: 2 s)" in history.text  # next try
    assert "4 of 5 restarts left" in browser.find_element(By.TAG_NAME, "body").text
    browser.save_screenshot(str(ARTIFACTS / "failover-page.png"))

    # Restart B's region (after confirming): B and its consumer regions C and D run again, A does not.
    browser.find_element(By.CSS_SELECTOR, "button.restart[data-region='B']").click()
    question = wait_for(
        browser, ec.visibility_of_element_located((By.ID, "confirm-text")), what="the confirmation"
    )
    assert question.text.startswith("Restart R2 (B) and its consumer regions R3 (C), R4 (D)?")
    browser.find_element(By.ID, "cancel-restart").click()  # cancelling changes nothing
    assert not browser.find_elements(By.ID, "confirm-text")
    browser.find_element(By.CSS_SELECTOR, "button.restart[data-region='B']").click()
    wait_for(
        browser, ec.element_to_be_clickable((By.ID, "confirm-restart")), what="the confirm button"
    ).click()
    message = wait_for(
        browser,
        lambda d: (
            d.find_element(By.ID, "message").text.startswith("Restarted")
            and d.find_element(By.ID, "message").text
        ),
        what="the restart message",
    )
    assert message == "Restarted: B, C, D"
    browser.save_screenshot(str(ARTIFACTS / "failover-page-restarted.png"))

    final = live_airflow.client.wait_for_dag_run(DAG, run_id, timeout=900)
    assert final["state"] == "success", live_airflow.describe_run(DAG, run_id)
    assert tries(live_airflow, run_id) == {"A": 1, "B": 2, "C": 3, "D": 2}
    manual = [e for e in stored_events(journal) if e["kind"] == "manual"]
    assert [(e["task"], e["user"], e["tasks"], e["cleared"]) for e in manual] == [
        ("B", live_airflow.username, ["B", "C", "D"], ["B", "C", "D"])
    ]
    # Cleared by the API server as the user, not with the airflow_api connection's account: every
    # restart request of this module (the refused ones too) is in the audit log under the user's name,
    # and no clear of this run went through the REST API.
    audit = [
        (e["event"], e["owner"])
        for e in live_airflow.client.event_logs(DAG, run_id=run_id)
        if e["event"] in ("ft_restart_region", "post_clear_task_instances")
    ]
    assert audit and set(audit) == {("ft_restart_region", live_airflow.username)}, audit
    run = RunRef(DAG, run_id)
    assert store.manifest(run.parse("a")).attempt_id == a_before  # read again, not recomputed
    for partition, depth, producer_try in (("b", 1, 2), ("c", 2, 3), ("d", 2, 2)):
        assert store.manifest(run.parse(partition)).producer.try_number == producer_try
        rows = sorted((r["key"], r["value"]) for r in read_table(store, run.parse(partition)).to_pylist())
        assert rows == [(key, key * 10 + depth) for key in range(40)]

    # B, the region the restart named, was computed again; C and D read its new output, the same rows
    # as before, and reused their outputs (no Spark).
    reused = [e for e in stored_events(journal) if e["kind"] == "reused"]
    assert sorted((e["task"], e["try_number"]) for e in reused) == [("C", 3), ("D", 2)]

    # The page, reloaded, shows the manual restart next to the failover, then the reused tries.
    browser.refresh()
    browser.switch_to.frame(wait_for(browser, ec.presence_of_element_located((By.TAG_NAME, "iframe"))))
    wait_for(
        browser,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, ".history-row")) == 4,
        what="four history rows",
    )
    rows = [row.text for row in browser.find_elements(By.CSS_SELECTOR, ".history-row")]
    assert "manual (admin)" in rows[1], rows
    assert all("reused" in row and "Spark not started" in row and "fail:" not in row for row in rows[2:]), (
        rows
    )
    browser.execute_script("document.getElementById('history').scrollIntoView()")
    browser.save_screenshot(str(ARTIFACTS / "failover-page-history.png"))
