"""Scenario set 1: the region-failover scenarios of tests/e2e/test_region_failover.py, unchanged, on
the reference deployment (CeleryExecutor with two workers, PostgreSQL, Spark standalone + Connect).

The tests are imported from the e2e module; the fixtures they take (``live_airflow``, ``store``,
``spark_connect``, ``scenario_runs``) are the deployment's (tests/cluster/conftest.py). The exchange
matrix, which checks exchange shapes rather than the deployment, stays with tests/e2e.
"""

import pytest

from ft_harness.chaos.scenario_runs import SCENARIOS
from tests.e2e.test_region_failover import (  # noqa: F401  (the tests and their fixtures)
    store,
    test_a_try_killed_after_its_spark_work_is_committed_by_the_next_without_spark,
    test_exponential_delay_grows_and_respects_the_maximum,
    test_failure_rate_fails_on_the_failure_above_the_maximum,
    test_fixed_delay_tries_attempts_plus_one_times_then_fails,
    test_killed_task_process_still_restarts_its_region,
    test_manual_region_restart_reruns_region_and_consumers_only,
    test_mapped_stage_restarts_only_the_failed_index_chain,
    test_pipelined_region_restarts_as_a_unit,
    test_seed002_failed_consumer_restarts_alone,
    test_seed002_lost_partition_backtracks_to_its_producer,
    test_the_end_of_a_failed_run_drops_the_views_nobody_consumed,
)

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def runs(scenario_runs):
    return scenario_runs.start(name for name in SCENARIOS if not name.startswith("matrix"))
