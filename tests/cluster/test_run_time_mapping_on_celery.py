"""Stages mapped over another task's output (tests/e2e/test_run_time_mapping.py), unchanged, on the
reference deployment: CeleryExecutor with two workers (each try asks the API server for its stage's
count through its own worker), Spark standalone with Connect on a host of its own, the executors'
data path."""

import pytest

from tests.e2e.test_run_time_mapping import (  # noqa: F401  (the tests and their fixtures)
    runs,
    store,
    test_a_checkpointed_stage_mapped_at_run_time_resumes_its_failed_index_from_its_checkpoint,
    test_a_failure_in_index_23_restarts_its_region_and_a_lost_partition_of_index_5_backtracks,
    test_a_map_of_one_item_runs_as_one_region,
    test_a_rebuilt_input_of_another_size_keeps_the_decided_count,
    test_a_stage_mapped_over_a_mapped_stages_results,
    test_after_the_run_one_indexs_region_restarted_by_hand_reruns_it_and_reuses_the_rest,
    test_an_empty_map_skips_its_stages_and_their_consumers_and_the_run_succeeds,
    test_auto_parallelism_sizes_a_small_input_to_one_shard,
    test_auto_parallelism_sizes_by_the_rule_and_a_region_restart_keeps_the_count,
    test_unequal_counts_on_a_pointwise_pipelined_exchange_fail_the_consumer_without_retry,
)

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3, pytest.mark.timeout(1500)]
