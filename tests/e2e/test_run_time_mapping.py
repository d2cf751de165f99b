"""Stages mapped over another task's output, in a real Airflow with Spark Connect stages and S3: the
run's graph is completed when their counts are known, and region failover works on it.

    list_files ──▶ [parse_file[i] ~~parsed[i]~~> score_file[i]] ──scores──▶ daily_report
                                                   (dags_examples/daily_files.py, one region per file)

All runs are triggered at once (module fixture); each test waits for its own.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from airflow_ft_provider.failover.sizes import human_size
from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.airflow.airflow_rest import try_numbers
from ft_harness.chaos.pipelines import actual_report, expected_report
from ft_harness.data.journal_records import stored_events

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

FILES = "ft_example_daily_files"
RUNS = {
    # 37 files; score_file[23] fails once, and scores[5] is lost before daily_report reads it
    "files_37": (
        FILES,
        {
            "files": 37,
            "ft_faults": [
                {"task": "score_file[23]", "times": 1},
                {"task": "daily_report", "delete": ["scores[5]"]},
            ],
        },
    ),
    "files_1": (FILES, {"files": 1}),
    "files_0": (FILES, {"files": 0}),  # an empty map: the stages and the report are skipped
    # left expands over 3 items, right over 2, and right reads left's pipelined partitions pointwise
    "mismatch": ("ft_e2e_count_mismatch", {}),
    # follow expands over make's results (Airflow's map over a mapped task's output)
    "map_over_map": ("ft_e2e_map_over_map", {}),
    # sized's shards from raw's committed size at 1 MB a shard: about 0.2 MB, then 6 to 11 MB (one
    # shard failing once), then 1.5 to 3 MB with raw lost and rebuilt (with another size)
    # a checkpointed stage mapped over a task's output; index 1 fails inside micro-batch 2
    "checkpointed": (
        "ft_e2e_checkpointed_mapped",
        {"ft_faults": [{"task": "scale_part[1]", "mode": "batch", "batch": 2}]},
    ),
    "auto_small": ("ft_e2e_auto_parallelism", {"rows": 2000}),
    "auto_sized": (
        "ft_e2e_auto_parallelism",
        {"rows": 80000, "ft_faults": [{"task": "sized[1]", "times": 1}]},
    ),
    "auto_rebuilt": (
        "ft_e2e_auto_parallelism",
        {"rows": 20000, "ft_faults": [{"task": "sized[0]", "delete": ["raw"]}]},
    ),
    # volume: just over 1 GB of incompressible rows, sliced at 256 MB a shard
    "auto_1gb": ("ft_e2e_auto_parallelism_1gb", {}),
}


def start_runs(live_airflow, names):
    """Trigger the runs ``names`` of RUNS at once; (dag id, run id) of each."""
    live_airflow.wait_for_dags({RUNS[name][0] for name in names}, timeout=120)
    stamp = datetime.now().strftime("%H%M%S%f")
    started = {}
    for name in names:
        dag_id, conf = RUNS[name]
        run_id = f"runtime_{name}__{stamp}"
        live_airflow.client.trigger_dag_run(dag_id, conf, run_id=run_id)
        started[name] = (dag_id, run_id)
    return started


@pytest.fixture(scope="module")
def runs(live_airflow):
    return start_runs(live_airflow, RUNS)


@pytest.fixture(scope="module")
def store(s3_endpoint, e2e_store_url):
    return S3PartitionStore(s3_endpoint.client(), e2e_store_url)


def finish(live_airflow, runs, name, timeout=900):
    dag_id, run_id = runs[name]
    run = live_airflow.client.wait_for_dag_run(dag_id, run_id, timeout=timeout)
    tis = live_airflow.client.task_instances(dag_id, run_id)
    return run, tis, live_airflow.describe_run(dag_id, run_id)


def test_a_failure_in_index_23_restarts_its_region_and_a_lost_partition_of_index_5_backtracks(
    live_airflow, runs, store
):
    run, tis, story = finish(live_airflow, runs, "files_37")
    dag_id, run_id = runs["files_37"]
    assert run["state"] == "success", story
    tries = try_numbers(tis)
    again = {task: n for task, n in tries.items() if n > 1}
    # index 23's region (its failure), index 5's region (backtracking to the producer of scores[5]),
    # and the report that found scores[5] lost; the 35 other files' regions ran once
    assert again == {
        "score_file[23]": 2,
        "parse_file[23]": 2,
        "score_file[5]": 2,
        "parse_file[5]": 2,
        "daily_report": 2,
    }, story
    assert sum(1 for task in tries if task.startswith("score_file[")) == 37
    assert actual_report(store, run_id) == expected_report(37)
    events = stored_events(RecoveryJournal(store, RunRef(dag_id, run_id)))
    expanded = sorted((e["task"], e["count"]) for e in events if e["kind"] == "expanded")
    assert expanded == [("parse_file", 37), ("score_file", 37)], events
    failovers = {e["task"]: e for e in events if e["kind"] == "failover"}
    assert ["parse_file[23]", "score_file[23]"] in failovers["score_file[23]"]["regions"]
    assert not any("[22]" in t or "[24]" in t for r in failovers["score_file[23]"]["regions"] for t in r)
    assert failovers["daily_report"]["unavailable"] == ["scores[5]"]
    assert ["parse_file[5]", "score_file[5]"] in failovers["daily_report"]["regions"]
    # every reader of the run sees the expanded graph: the stored pipeline, as the failover page reads it
    stored = RecoveryJournal(store, RunRef(dag_id, run_id)).description()
    assert stored is not None and stored.map_counts == {"parse_file": 37, "score_file": 37}
    assert stored.tasks_named("score_file")[36] == "score_file[36]"


def test_after_the_run_one_indexs_region_restarted_by_hand_reruns_it_and_reuses_the_rest(
    live_airflow, runs, store
):
    # after test_a_failure_in_index_23_...: the run is over
    run, before, story = finish(live_airflow, runs, "files_37")
    dag_id, run_id = runs["files_37"]
    result = live_airflow.provider_cli(
        "restart-region", "--dag-id", dag_id, "--run-id", run_id, "--task", "score_file[3]"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == {
        "task": "score_file[3]",
        "restarted": ["daily_report", "parse_file[3]", "score_file[3]"],
    }
    report_try = try_numbers(before)["daily_report"]
    live_airflow.client.wait_for_task_instance(
        dag_id,
        run_id,
        "daily_report",
        predicate=lambda ti: ti["try_number"] > report_try and ti["state"] == "success",
        timeout=600,
    )
    run, after, story = finish(live_airflow, runs, "files_37")
    assert run["state"] == "success", story
    old, new = try_numbers(before), try_numbers(after)
    assert {task for task in new if new[task] != old[task]} == {
        "parse_file[3]",
        "score_file[3]",
        "daily_report",
    }
    # score_file[3] wrote the same rows again: the report's new try took its earlier output, no Spark
    reused = [
        e for e in stored_events(RecoveryJournal(store, RunRef(dag_id, run_id))) if e["kind"] == "reused"
    ]
    assert [(e["task"], e["try_number"]) for e in reused] == [("daily_report", new["daily_report"])], story
    assert actual_report(store, run_id) == expected_report(37)


def test_a_map_of_one_item_runs_as_one_region(live_airflow, runs, store):
    run, tis, story = finish(live_airflow, runs, "files_1")
    dag_id, run_id = runs["files_1"]
    assert run["state"] == "success", story
    assert try_numbers(tis) == {"list_files": 1, "parse_file[0]": 1, "score_file[0]": 1, "daily_report": 1}
    assert actual_report(store, run_id) == expected_report(1)


def test_an_empty_map_skips_its_stages_and_their_consumers_and_the_run_succeeds(live_airflow, runs, store):
    run, tis, story = finish(live_airflow, runs, "files_0")
    dag_id, run_id = runs["files_0"]
    assert run["state"] == "success", story
    states = {ti["task_id"]: ti["state"] for ti in tis}
    assert states == {
        "list_files": "success",
        "parse_file": "skipped",
        "score_file": "skipped",
        "daily_report": "skipped",
    }, story
    stored = RecoveryJournal(store, RunRef(dag_id, run_id)).description()
    assert stored is None  # no stage try ran: nothing was stored for the run


def test_unequal_counts_on_a_pointwise_pipelined_exchange_fail_the_consumer_without_retry(live_airflow, runs):
    run, tis, story = finish(live_airflow, runs, "mismatch")
    dag_id, run_id = runs["mismatch"]
    assert run["state"] == "failed", story
    states = {(ti["task_id"], ti["map_index"]): (ti["state"], ti["try_number"]) for ti in tis}
    assert all(states[("left", i)] == ("success", 1) for i in range(3)), story
    assert {states[("right", i)] for i in range(2)} == {("failed", 1)}, story  # not retried
    log = live_airflow.task_log(dag_id, run_id, "right", 1, map_index=0)
    assert "stage 'right' runs with 2 map indexes and reads the pipelined result 'sides' pointwise" in log
    assert "from stage 'left', which ran with 3" in log


def test_a_stage_mapped_over_a_mapped_stages_results(live_airflow, runs, store):
    run, tis, story = finish(live_airflow, runs, "map_over_map")
    dag_id, run_id = runs["map_over_map"]
    assert run["state"] == "success", story
    assert try_numbers(tis) == {
        "sizes": 1,
        **{f"make[{i}]": 1 for i in range(3)},
        **{f"follow[{i}]": 1 for i in range(3)},
    }, story
    for i, size in enumerate((1, 2, 3)):
        rows = read_table(store, RunRef(dag_id, run_id).parse(f"followed[{i}]")).to_pylist()
        assert {(r["size"], r["source"], r["rows"]) for r in rows} == {(size, f"made[{i}]", size)}
        assert len(rows) == size


def shards_run(live_airflow, runs, store, name):
    """(tries, the recorded count, raw's committed bytes, the planner's 'expanded' event)."""
    run, tis, story = finish(live_airflow, runs, name)
    dag_id, run_id = runs[name]
    assert run["state"] == "success", story
    stored = RecoveryJournal(store, RunRef(dag_id, run_id)).description()
    assert stored is not None
    raw = store.manifest(RunRef(dag_id, run_id).parse("raw")).total_size
    [event] = [
        e for e in stored_events(RecoveryJournal(store, RunRef(dag_id, run_id))) if e["kind"] == "expanded"
    ]
    total = read_table(store, RunRef(dag_id, run_id).parse("total")).to_pylist()
    rows = store.manifest(RunRef(dag_id, run_id).parse("raw")).row_count
    assert total == [{"rows": rows, "ids": rows}]  # every row of raw in exactly one shard
    return try_numbers(tis), stored.map_counts["sized"], raw, event


def rule(size):
    """Flink's: ceil(bytes / avg-data-volume-per-task) within [1, 16], at 1 MB a shard."""
    return min(16, max(1, -(-size // (1 << 20))))


def test_auto_parallelism_sizes_a_small_input_to_one_shard(live_airflow, runs, store):
    tries, count, raw, event = shards_run(live_airflow, runs, store, "auto_small")
    assert count == rule(raw) == 1
    assert tries == {"produce": 1, "auto_parallelism": 1, "sized[0]": 1, "total": 1}
    assert (
        event["reason"].startswith("auto parallelism: 1 shard: ") and "at 1 MB per shard" in event["reason"]
    )


def test_auto_parallelism_sizes_by_the_rule_and_a_region_restart_keeps_the_count(live_airflow, runs, store):
    tries, count, raw, event = shards_run(live_airflow, runs, store, "auto_sized")
    assert count == rule(raw) and 6 <= count <= 12, (count, raw)
    assert sum(1 for task in tries if task.startswith("sized[")) == count
    assert {task: n for task, n in tries.items() if n > 1} == {"sized[1]": 2}  # its region alone
    assert event["count"] == count and event["try_number"] is None
    assert event["reason"].startswith(f"auto parallelism: {count} shards: ")


def test_auto_parallelism_sizes_a_1_gb_input_by_the_rule(live_airflow, runs, store):
    run, tis, story = finish(live_airflow, runs, "auto_1gb")
    dag_id, run_id = runs["auto_1gb"]
    assert run["state"] == "success", story
    ref = RunRef(dag_id, run_id)
    volume = store.manifest(ref.parse("volume")).total_size
    assert 1 << 30 <= volume < 5 << 28, volume  # 1 GB to 1.25 GB: what the test is about
    count = min(64, max(1, -(-volume // (256 << 20))))  # Flink's rule at 256 MB a shard, max 64
    stored = RecoveryJournal(store, ref).description()
    assert stored is not None and stored.map_counts["volume_slice"] == count
    [event] = [e for e in stored_events(RecoveryJournal(store, ref)) if e["kind"] == "expanded"]
    assert event["reason"] == f"auto parallelism: {count} shards: {human_size(volume)} at 256 MB per shard"
    assert try_numbers(tis) == {
        "produce_volume": 1,
        "auto_parallelism": 1,
        **{f"volume_slice[{i}]": 1 for i in range(count)},
    }, story
    slices = [read_table(store, ref.parse(f"slices[{i}]")).to_pylist() for i in range(count)]
    assert slices == [[{"shard": i, "shards": count}] for i in range(count)]


def test_a_rebuilt_input_of_another_size_keeps_the_decided_count(live_airflow, runs, store):
    tries, count, raw, event = shards_run(live_airflow, runs, store, "auto_rebuilt")
    assert tries["produce"] == 2 and tries["auto_parallelism"] == 1  # raw rebuilt; no new decision
    assert sum(1 for task in tries if task.startswith("sized[")) == count == event["count"]
    assert all(tries[f"sized[{i}]"] >= 2 for i in range(count))  # every shard read raw again


def test_a_checkpointed_stage_mapped_at_run_time_resumes_its_failed_index_from_its_checkpoint(
    live_airflow, runs, store
):
    run, tis, story = finish(live_airflow, runs, "checkpointed")
    dag_id, run_id = runs["checkpointed"]
    assert run["state"] == "success", story
    tries = try_numbers(tis)
    assert {t: n for t, n in tries.items() if n > 1} == {"scale_part[1]": 2}, story
    restores = [
        (e["task"], e["try_number"], e["restored_from"])
        for e in stored_events(RecoveryJournal(store, RunRef(dag_id, run_id)))
        if e["kind"] == "checkpoint"
    ]
    # resumed, not started over: from micro-batch 1 (the staged path's last completed checkpoint) or
    # 2 (the executors' path: the batches whose output the store holds, Spark's checkpoint says which)
    [(_, _, resumed_from)] = [r for r in restores if r[:2] == ("scale_part[1]", 2)]
    assert resumed_from in (1, 2), restores
    for part in (0, 1):
        rows = read_table(store, RunRef(dag_id, run_id).parse(f"scaled[{part}]")).to_pylist()
        assert sorted(r["reading"] for r in rows) == list(range(part * 3000, (part + 1) * 3000))  # each once
        assert {r["part"] for r in rows} == {part}
