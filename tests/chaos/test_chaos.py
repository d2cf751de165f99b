"""Chaos, short bounded mode: seeded random faults, an S3 outage and the loss of the Spark Connect
server across concurrent runs of the orders ETL example, and one run of the daily files example (stages
mapped over an upstream task's output), in the live Airflow (ft_harness/chaos/chaos.py has the fault
kinds and verdicts; bench/bench_chaos.py runs the long mode).

    generate_orders --> [clean_orders ~~> enrich_orders] --> daily_revenue
                                                        \\--> customer_aggregates

Every run must either recover with the failure-free output and intact partitions, or fail with the
restart strategy's suppression reason; wrong data, a damaged committed partition or an unexplained
failure fails the test.
"""

from __future__ import annotations

import random

import pytest

from airflow_ft_provider.partitions import S3PartitionStore
from ft_harness.chaos.chaos import count, make_plan, run_plans
from ft_harness.chaos.pipelines import DAILY_FILES

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

# This seed gives all five fault kinds (raise, app, kill, delete, truncate) and one S3 outage in 3 runs;
# one run also loses the Spark Connect server (stages run on it in the live fixture).
SEED, RUNS = 20261127, 3
SERVER_LOSS_AFTER = 25.0
# And one run of the pipeline mapped at run time (five files): a failure inside score_file[3]'s Spark
# work, scores[2] deleted before daily_report reads it, parse_file[4] failing twice.
FILES_SEED = 20261136


def test_seeded_faults_never_end_in_wrong_data_or_damaged_partitions(
    live_airflow, s3_proxy, s3_endpoint, e2e_store_url, spark_connect
):
    rng = random.Random(SEED)
    plans = [make_plan(rng, outages=s3_proxy is not None) for _ in range(RUNS)]
    if s3_proxy is not None and not any(p.outage_after for p in plans):
        plans[0].outage_after, plans[0].outage_seconds = 15.0, 3.0  # the bounded mode always has one outage
    plans[-1].server_loss_after = SERVER_LOSS_AFTER  # the server is shared: every run in flight loses it
    plans.append(make_plan(random.Random(FILES_SEED), outages=False, pipeline=DAILY_FILES))
    store = S3PartitionStore(s3_endpoint.client(), e2e_store_url)
    verdicts = run_plans(
        live_airflow, store, plans, proxy=s3_proxy, spark_connect=spark_connect, prefix="chaos"
    )
    story = "\n".join(
        f"{v.run_id}: {v.outcome} {v.plan.describe()} tries={v.tries} {v.detail[:3000]}" for v in verdicts
    )
    figures = count(verdicts)
    print(f"\nchaos: {figures}\n{story}")
    assert (
        figures["data_mismatches"] == figures["damaged_partitions"] == figures["unexplained_failures"] == 0
    ), story
    assert figures["recovered"] + figures["suppressed"] == len(plans), story
    assert figures["faults_injected"] >= len(plans) and figures["restarted_tries"] >= len(plans), story
    if s3_proxy is not None:
        assert s3_proxy.outages >= 1, story
    assert figures["server_losses"] == 1, story
