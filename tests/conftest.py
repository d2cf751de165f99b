"""Shared fixtures for the whole test suite."""

from ft_harness.services.s3_server import s3_bucket, s3_endpoint  # noqa: F401  (fixtures)

# Live Airflow 3.3 for end-to-end tests (ft_harness/airflow/live_fixtures.py): fixtures ``live_airflow`` and
# ``live_airflow_factory``, plus a hook that attaches the components' log paths/tails to failing tests.
pytest_plugins = [
    "ft_harness.airflow.live_fixtures",
    "ft_harness.services.spark_env",
    "ft_harness.services.spark_cluster",
    "ft_harness.services.spark_connect",
    "ft_harness.services.remote_spark",
    "ft_harness.airflow.dag_test",
    "ft_harness.chaos.scenario_runs",
    "ft_harness.runners.background_demo",
    "ft_harness.services.statsd",
    "ft_harness.services.lineage_listener",
]
