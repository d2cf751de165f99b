"""Shared fixtures for the whole test suite."""

from ft_harness.s3_server import s3_bucket, s3_endpoint  # noqa: F401  (fixtures)

# Live Airflow 3.3 for end-to-end tests (ft_harness/live_airflow.py): fixtures ``live_airflow`` and
# ``live_airflow_factory``, plus a hook that attaches the components' log paths/tails to failing tests.
pytest_plugins = [
    "ft_harness.live_airflow", "ft_harness.spark_cluster", "ft_harness.spark_connect", "ft_harness.dag_test",
    "ft_harness.scenario_runs", "ft_harness.background_demo",
]


def pytest_addoption(parser):
    parser.addoption("--cluster", action="store_true",
                     help="run tests/cluster: the scenarios on the reference distributed deployment "
                          "(scripts/cluster-test.sh does)")


def pytest_collection_modifyitems(config, items):
    """tests/cluster needs --cluster: those tests are deselected (and counted as such) without it."""
    if config.getoption("--cluster"):
        return
    cluster = [item for item in items if "tests/cluster/" in item.nodeid.replace("\\", "/")]
    if cluster:
        config.hook.pytest_deselected(items=cluster)
        items[:] = [item for item in items if item not in cluster]
