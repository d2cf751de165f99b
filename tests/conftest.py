"""Shared fixtures for the whole test suite."""

import atexit
import os
import shutil
import tempfile

# Airflow reads $AIRFLOW_HOME/airflow.cfg when it is imported, and writes one there first, with every
# provider option's default of that day spelled out: a machine's ~/airflow/airflow.cfg would hold an
# older version's defaults. The suite's processes read a home of their own (their children inherit it).
if "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="ft-tests-airflow-home-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)

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
