"""Metrics through Airflow's stats, at a real StatsD socket (ft_harness/services/statsd.py): the session's
live Airflow sends them with InfluxDB-style tags, so each run's lines are told apart by ``dag_id``.

Three runs: seed 002 losing partition b (backtracking: B, C and D run again; on a DAG of its own, as
tags do not tell runs apart), a stage with a code bug (not recoverable), and the checkpointed example
failing inside micro-batch 2 (its retry resumes)."""

from __future__ import annotations

from datetime import datetime

import pytest

from ft_harness.airflow.airflow_rest import try_numbers

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

CHECKPOINTED = "ft_example_checkpointed_stage"
BUG = "ft_e2e_code_bug"
SEED = "ft_e2e_seed002_metrics"  # its own copy of seed 002: no other test's runs share its metrics
SEED_B_LOST = [{"task": "C", "delete": ["b"]}]
CHECKPOINT_FAULT = [{"task": "scale_readings", "mode": "batch", "batch": 2, "times": 1}]


def of(metrics, name, dag_id):
    return [m for m in metrics if m.name == f"airflow.{name}" and m.tags.get("dag_id") == dag_id]


def test_restarts_failures_partitions_and_checkpoints_reach_statsd(
    live_airflow, statsd_listener, s3_endpoint, e2e_store_url
):
    api = live_airflow.client
    live_airflow.wait_for_dags({SEED, BUG, CHECKPOINTED}, timeout=120)
    stamp = datetime.now().strftime("%H%M%S%f")
    started = {}
    for name, dag_id, faults in (
        ("seed", SEED, SEED_B_LOST),
        ("bug", BUG, []),
        ("checkpointed", CHECKPOINTED, CHECKPOINT_FAULT),
    ):
        run_id = f"metrics_{name}__{stamp}"
        api.trigger_dag_run(dag_id, {"ft_faults": faults}, run_id=run_id)
        started[name] = (dag_id, run_id)
    ended = {name: api.wait_for_dag_run(*run, timeout=900) for name, run in started.items()}
    assert ended["bug"]["state"] == "failed" and ended["seed"]["state"] == "success", ended
    assert ended["checkpointed"]["state"] == "success", live_airflow.describe_run(*started["checkpointed"])
    assert try_numbers(api.task_instances(*started["bug"])) == {"amounts": 1}  # no restart

    def arrived(metrics):
        return all(
            of(metrics, name, dag_id)
            for name, dag_id in (
                ("ft.backtracking", SEED),
                ("ft.restarting_time", SEED),
                ("ft.partitions.rebuilt", SEED),
                ("ft.failures.not_recoverable", BUG),
                ("ft.checkpoints.restored", CHECKPOINTED),
            )
        )

    metrics = statsd_listener.wait_for(arrived, timeout=60)

    # seed 002, b lost: one restart of three regions that rebuilds b (Flink's numRestarts, restartingTime)
    restarts = of(metrics, "ft.restarts", SEED)
    seen = [m for m in metrics if m.tags.get("dag_id") == SEED and ".ft." in m.name]
    assert restarts and {m.kind for m in restarts} == {"c"}, seen
    # C and D both read b: whichever finds it missing first asks for the restart (the other's failure
    # falls in the region already restarting)
    lost = [m for m in restarts if m.tags.get("kind") == "lost_data"]
    assert lost and {m.tags.get("task_id") for m in lost} <= {"C", "D"}, seen
    assert max(m.value for m in of(metrics, "ft.regions_restarted", SEED)) == 3, seen
    assert sum(m.value for m in of(metrics, "ft.partitions.lost", SEED)) >= 1, seen
    timings = of(metrics, "ft.restarting_time", SEED)
    assert timings and all(m.kind == "ms" and 0 < m.value < 120_000 for m in timings), seen
    rebuilt = of(metrics, "ft.partitions.rebuilt", SEED)
    assert {m.tags.get("result") for m in rebuilt} >= {"b"}, seen
    assert sum(m.value for m in of(metrics, "ft.partitions.committed_bytes", SEED)) > 0, seen
    # where each try's time went: every stage try that ran Spark times its phases
    spark_phases = of(metrics, "ft.stage.phase.spark", SEED)
    assert {m.tags.get("task_id") for m in spark_phases} >= {"A", "B", "C", "D"}, seen
    assert all(m.kind == "ms" and m.value > 0 and m.tags.get("phase") == "spark" for m in spark_phases), seen
    assert of(metrics, "ft.stage.phase.commit", SEED) and of(metrics, "ft.stage.phase.gate", SEED), seen

    # the code bug: a decision that restarts nothing, labelled
    seen = [m for m in metrics if m.tags.get("dag_id") == BUG and ".ft." in m.name]
    [failure] = of(metrics, "ft.failures.not_recoverable", BUG)
    assert failure.tags["kind"] == "user_code" and failure.tags["error_class"].startswith(
        "UNRESOLVED_COLUMN"
    ), seen
    assert of(metrics, "ft.failover_decisions.not_recoverable", BUG), seen
    assert not of(metrics, "ft.restarts", BUG), seen

    # the checkpointed stage: its checkpoints, the restore of its retry, and their timings
    seen = [m for m in metrics if m.tags.get("dag_id") == CHECKPOINTED and ".ft." in m.name]
    assert sum(m.value for m in of(metrics, "ft.checkpoints.completed", CHECKPOINTED)) >= 3, seen
    assert {m.tags.get("via") for m in of(metrics, "ft.checkpoints.restored", CHECKPOINTED)} <= {
        "local",
        "store",
        "spark",  # the executors' path (the default): Spark's own checkpoint
    }, seen
    assert all(m.kind == "ms" for m in of(metrics, "ft.checkpoints.duration", CHECKPOINTED)), seen
    assert all(m.kind == "g" and m.value > 0 for m in of(metrics, "ft.checkpoints.size", CHECKPOINTED)), seen
