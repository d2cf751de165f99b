"""The cluster scenarios run on the reference distributed deployment (ft_harness/airflow/deployment.py):
PostgreSQL, Redis, Airflow with CeleryExecutor and two workers, a Spark standalone cluster (master, two
workers) with a Spark Connect server on it, and the S3 test endpoint.

``scripts/test.sh`` runs them as the suite's last session, from the end of the live-Airflow session on,
beside the tail of the untimed tests (at nice 10); ``scripts/cluster-test.sh`` runs them alone.

The fixtures the end-to-end tests use (``live_airflow``, ``e2e_store_url``, ``spark_connect``,
``scenario_runs``) are the deployment's here, so tests/e2e's scenarios run unchanged on it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ft_harness.airflow.deployment import ReferenceDeployment
from ft_harness.airflow.live_airflow import E2E_DAGS_DIR, EXAMPLE_DAGS_DIR
from ft_harness.chaos.scenario_runs import ScenarioRuns

CLUSTER_DAGS = Path(__file__).resolve().parent / "dags"
# The example pipelines the cluster scenarios run too (with the module they share)
EXAMPLES = [EXAMPLE_DAGS_DIR / name for name in ("daily_files.py", "example_support.py")]


@pytest.fixture(scope="session")
def deployment(s3_endpoint, statsd_listener, tmp_path_factory):
    with ReferenceDeployment(
        [E2E_DAGS_DIR, CLUSTER_DAGS, *EXAMPLES],
        folder=tmp_path_factory.mktemp("deployment"),
        s3=s3_endpoint,
        env=statsd_listener.environment(),  # metrics from every component, as an operator would see them
    ) as started:
        print(f"\n[deployment] up in {started.started_in:.0f} s\n{started.describe()}")
        yield started


@pytest.fixture(scope="session")
def live_airflow(deployment):
    return deployment.airflow


@pytest.fixture(scope="session")
def e2e_store_url(deployment):
    return deployment.store_url


@pytest.fixture(scope="session")
def spark_connect(deployment):
    return deployment.connect


@pytest.fixture(scope="session")
def scenario_runs(live_airflow):
    return ScenarioRuns(live_airflow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing scenario's report carries the tails of every component's log."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and "deployment" in getattr(item, "fixturenames", ()):
        deployment = item.funcargs.get("deployment")
        if deployment is not None and deployment.airflow is not None:
            report.sections.append(("deployment logs", deployment.airflow.describe_logs(tail=25)))
