"""Shared fixtures for the whole test suite."""

from tests.support.s3_server import s3_bucket, s3_endpoint  # noqa: F401  (fixtures)

# Live Airflow 3.3 for end-to-end tests (tests/support/live_airflow.py): fixtures ``live_airflow`` and
# ``live_airflow_factory``, plus a hook that attaches the components' log paths/tails to failing tests.
pytest_plugins = [
    "tests.support.live_airflow", "tests.support.spark_cluster", "tests.support.spark_connect", "tests.support.dag_test",
    "tests.support.scenario_runs", "tests.support.background_demo",
]
