"""Stages mapped over another task's output (tests/e2e/test_run_time_mapping.py), unchanged, on the
reference deployment: CeleryExecutor with two workers (each try asks the API server for its stage's
count through its own worker), Spark standalone with Connect on a host of its own, the executors'
data path.

The runs that exercise the deployment: the 37-file run (a failure in one index, a lost partition of
another, then one index's region restarted by hand), an empty map, a count mismatch, and shards sized
by the data with one failing. The other shapes of the e2e module (one item, map over map, a
checkpointed mapped stage, auto on a tiny and on a rebuilt input) check the same code paths on
LocalExecutor; here they would only lengthen the suite.
"""

import pytest

from tests.e2e.test_run_time_mapping import (  # noqa: F401  (the tests and their fixtures)
    start_runs,
    store,
    test_a_failure_in_index_23_restarts_its_region_and_a_lost_partition_of_index_5_backtracks,
    test_after_the_run_one_indexs_region_restarted_by_hand_reruns_it_and_reuses_the_rest,
    test_an_empty_map_skips_its_stages_and_their_consumers_and_the_run_succeeds,
    test_auto_parallelism_sizes_by_the_rule_and_a_region_restart_keeps_the_count,
    test_unequal_counts_on_a_pointwise_pipelined_exchange_fail_the_consumer_without_retry,
)

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def runs(live_airflow):
    return start_runs(live_airflow, ["files_37", "files_0", "mismatch", "auto_sized"])
