"""The example pipelines of dags_examples/: they parse (with the regions their docstrings promise) and
each one runs end to end, with an injected failure, in a real Airflow with local Spark and S3.

All example runs are triggered at once (module fixture) so that they overlap; each test waits for its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.partitions.pipelined import PipelinedPartitions
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.airflow.airflow_rest import try_numbers
from ft_harness.chaos.orders_expected import actual_outputs, expected_outputs
from ft_harness.data.journal_records import stored_events

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "dags_examples"

# What tests/examples expects of every example DAG: its failover regions and region TaskGroups.
EXPECTED_REGIONS = {
    #   generate_orders --> [clean_orders ~~> enrich_orders] --> daily_revenue
    #                                                       \--> customer_aggregates
    "ft_example_orders_etl": (
        [["clean_orders", "enrich_orders"], ["customer_aggregates"], ["daily_revenue"], ["generate_orders"]],
        ["region_clean_orders"],
    ),
    #   [read_shard[i] ~~> score_shard[i]] (i = 0..2, pointwise) --> merge_shards
    "ft_example_sharded_scoring": (
        [
            ["merge_shards"],
            ["read_shard[0]", "score_shard[0]"],
            ["read_shard[1]", "score_shard[1]"],
            ["read_shard[2]", "score_shard[2]"],
        ],
        ["region_read_shard"],
    ),
    #   [make_events[i] ~~> clean_events[i]] (i = 0..1, pointwise) --> user_totals      (@ft_stage)
    "ft_example_decorated_stages": (
        [["clean_events[0]", "make_events[0]"], ["clean_events[1]", "make_events[1]"], ["user_totals"]],
        ["region_make_events"],
    ),
    #   list_files --> [parse_file[i] ~~> score_file[i]] (one per file, counted at run time) --> daily_report
    "ft_example_daily_files": ([["daily_report"], ["parse_file", "score_file"]], ["region_parse_file"]),
    #   make_readings --> scale_readings (checkpointed) --> hourly_totals
    "ft_example_checkpointed_stage": ([["hourly_totals"], ["make_readings"], ["scale_readings"]], []),
    "ft_example_restart_fixed_delay": ([["ingest"]], []),
    "ft_example_restart_exponential_delay": ([["ingest"]], []),
    "ft_example_restart_failure_rate": ([["ingest"]], []),
}

_PARSE = """
import json
from pathlib import Path
from airflow.dag_processing.dagbag import BundleDagBag  # the folder on sys.path, as in the DAG processor
from airflow_ft_provider.pipeline import pipeline_of
bag = BundleDagBag(dag_folder={folder!r}, bundle_path=Path({folder!r}))
out = {{"errors": {{k: v for k, v in bag.import_errors.items()}}, "dags": {{}}}}
for dag_id, dag in bag.dags.items():
    p = pipeline_of(dag)
    out["dags"][dag_id] = {{
        "regions": sorted(sorted(r) for r in p.regions),
        "groups": sorted(p.region_groups),
        "schedule": type(dag.timetable).__name__,
        "params": dag.params.dump(),
        "retry_policy": sorted({{
            type(getattr(t, "retry_policy", None) or t.partial_kwargs.get("retry_policy")).__name__
            for t in dag.tasks if t.task_id in p.stages
        }}),
    }}
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    """Import dags_examples/ with DagBag in a clean Airflow home (as the DAG processor would)."""
    home = tmp_path_factory.mktemp("examples-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(EXAMPLES),
            "AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL": "s3://ft-examples/pipelines/",
            "PYTHONPATH": str(REPO),
        }
    )
    env.pop("FT_EXAMPLES_JOBS", None)  # the jobs/ folder next to the DAG files must be found by itself
    result = subprocess.run(
        [sys.executable, "-c", _PARSE.format(folder=str(EXAMPLES))],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = [x for x in result.stdout.splitlines() if x.startswith("RESULT")]
    assert result.returncode == 0 and line, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(line[-1][len("RESULT") :])


def test_every_example_imports_without_errors(parsed):
    assert parsed["errors"] == {}
    assert set(parsed["dags"]) == set(EXPECTED_REGIONS)


@pytest.mark.parametrize("dag_id", sorted(EXPECTED_REGIONS))
def test_example_regions_are_as_documented(parsed, dag_id):
    regions, groups = EXPECTED_REGIONS[dag_id]
    dag = parsed["dags"][dag_id]
    assert dag["regions"] == regions
    assert dag["groups"] == groups
    assert dag["params"] == {"ft_faults": []}  # no faults unless asked for
    assert dag["schedule"] == "NullTimetable"  # schedule=None: only runs when triggered
    assert dag["retry_policy"] == ["FailoverRetryPolicy"]


def test_missing_jobs_folder_is_a_clear_parse_error(tmp_path):
    (tmp_path / "dags").mkdir()
    for name in ("orders_etl.py", "example_support.py"):  # copied without jobs/
        (tmp_path / "dags" / name).write_text((EXAMPLES / name).read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "FT_EXAMPLES_JOBS"}
    env.update(
        {"AIRFLOW_HOME": str(tmp_path), "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path / "dags")])}
    )
    code = (
        f"import runpy\ntry:\n    runpy.run_path({str(tmp_path / 'dags' / 'orders_etl.py')!r})\n"
        "except FileNotFoundError as e:\n    print('ERR', e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert "ERR Spark application" in result.stdout and "FT_EXAMPLES_JOBS" in result.stdout, result.stderr[
        -2000:
    ]


# -- end to end ----------------------------------------------------------------------------------------

RUNS = {
    # the pipelined region restarts as a unit; raw_orders is re-read, the fan-out runs once
    "etl": ("ft_example_orders_etl", [{"task": "enrich_orders", "times": 1}]),
    # one shard fails; only that map index runs again
    "shards": ("ft_example_sharded_scoring", [{"task": "score_shard[1]", "times": 1}]),
    # a stage written with @ft_stage fails once; only its shard's region runs again
    "decorated": ("ft_example_decorated_stages", [{"task": "clean_events[1]", "times": 1}]),
    # a checkpointed stage fails inside micro-batch 2; its retry resumes at checkpoint 1
    "checkpointed": (
        "ft_example_checkpointed_stage",
        [{"task": "scale_readings", "mode": "batch", "batch": 2, "times": 1}],
    ),
    # the same stage fails twice under each restart strategy, then succeeds
    "fixed_delay": ("ft_example_restart_fixed_delay", [{"task": "ingest", "times": 2}]),
    "exponential_delay": ("ft_example_restart_exponential_delay", [{"task": "ingest", "times": 2}]),
    "failure_rate": ("ft_example_restart_failure_rate", [{"task": "ingest", "times": 2}]),
}


@pytest.fixture(scope="module")
def example_runs(live_airflow):
    api = live_airflow.client
    live_airflow.wait_for_dags({dag for dag, _ in RUNS.values()}, timeout=120)
    stamp = datetime.now().strftime("%H%M%S%f")
    started = {}
    for name, (dag_id, faults) in RUNS.items():
        run_id = f"example_{name}__{stamp}"
        api.trigger_dag_run(dag_id, {"ft_faults": faults}, run_id=run_id)
        started[name] = (dag_id, run_id)
    return started


@pytest.fixture(scope="module")
def example_store(s3_endpoint, e2e_store_url):
    return S3PartitionStore(s3_endpoint.client(), e2e_store_url)


def finish(live_airflow, example_runs, name, timeout=900):
    dag_id, run_id = example_runs[name]
    run = live_airflow.client.wait_for_dag_run(dag_id, run_id, timeout=timeout)
    tries = try_numbers(live_airflow.client.task_instances(dag_id, run_id))
    return run, tries, live_airflow.describe_run(dag_id, run_id)


def rows(store, dag_id, run_id, partition_id, columns):
    table = read_table(store, RunRef(dag_id, run_id).parse(partition_id)).to_pylist()
    return sorted(tuple(row[c] for c in columns) for row in table)


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.s3
def test_orders_etl_restarts_the_pipelined_region_only(live_airflow, example_runs, example_store):
    #   generate_orders --> [clean_orders ~~> enrich_orders (fails once)] --> daily_revenue
    #                                                                    \--> customer_aggregates
    run, tries, story = finish(live_airflow, example_runs, "etl")
    dag_id, run_id = example_runs["etl"]
    assert run["state"] == "success", story
    assert tries == {
        "generate_orders": 1,
        "clean_orders": 2,
        "enrich_orders": 2,
        "daily_revenue": 1,
        "customer_aggregates": 1,
    }, story
    raw = example_store.manifest(RunRef(dag_id, run_id).parse("raw_orders"))
    assert raw.producer.try_number == 1 and raw.row_count == 252  # re-read from S3, not recomputed
    assert actual_outputs(example_store, run_id) == expected_outputs()
    events = stored_events(RecoveryJournal(example_store, RunRef(dag_id, run_id)))
    assert [e["task"] for e in events] == ["enrich_orders"]
    # the failed task's region, plus its (not yet started) consumer regions, which needed no clearing;
    # clean_orders shares the failed task's region and had already run, so it had to be restarted
    assert events[0]["regions"] == [
        ["clean_orders", "enrich_orders"],
        ["daily_revenue"],
        ["customer_aggregates"],
    ]
    assert events[0]["cleared"] == ["clean_orders"]


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.s3
def test_sharded_scoring_restarts_only_the_failed_shard(live_airflow, example_runs, example_store):
    #   [read_shard[0] ~~> score_shard[0]] --\
    #   [read_shard[1] ~~> score_shard[1]] ---+--> merge_shards        score_shard[1] fails once
    #   [read_shard[2] ~~> score_shard[2]] --/
    run, tries, story = finish(live_airflow, example_runs, "shards")
    dag_id, run_id = example_runs["shards"]
    assert run["state"] == "success", story
    # Only shard 1's pipelined region runs again; merge_shards (not started yet) runs once. The other
    # shards' partitions are pending, not lost, while they run: no backtracking to them.
    assert tries == {
        "read_shard[0]": 1,
        "read_shard[1]": 2,
        "read_shard[2]": 1,
        "score_shard[0]": 1,
        "score_shard[1]": 2,
        "score_shard[2]": 1,
        "merge_shards": 1,
    }, story
    # Each shard's score read its pipelined readings from the current execution of its own region.
    pipelined = PipelinedPartitions(example_store)
    run_ref = RunRef(dag_id, run_id)
    assert [pipelined.resolve(run_ref.parse(f"shard_readings[{i}]")).execution for i in range(3)] == [
        "t1",
        "t2",
        "t1",
    ]
    expected = defaultdict(lambda: [0, 0, set()])
    for shard in range(3):
        for i in range(shard, 300, 3):
            reading = (i * 7919) % 1000
            if reading > 100:
                e = expected[i % 5]
                e[0], e[1] = e[0] + 1, e[1] + reading
                e[2].add(shard)
    assert rows(
        example_store, dag_id, run_id, "sensor_totals", ["sensor", "alerts", "total", "shards"]
    ) == sorted((sensor, a, t, len(s)) for sensor, (a, t, s) in expected.items())
    events = stored_events(RecoveryJournal(example_store, RunRef(dag_id, run_id)))
    assert [e["task"] for e in events] == ["score_shard[1]"]
    assert ["read_shard[1]", "score_shard[1]"] in events[0]["regions"] and ["merge_shards"] in events[0][
        "regions"
    ]


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.s3
def test_decorated_stages_restart_only_the_failed_shard(live_airflow, example_runs, example_store):
    #   [make_events[0] ~~> clean_events[0]] --\
    #   [make_events[1] ~~> clean_events[1]] ---+--> user_totals       clean_events[1] fails once
    run, tries, story = finish(live_airflow, example_runs, "decorated")
    dag_id, run_id = example_runs["decorated"]
    assert run["state"] == "success", story
    assert tries == {
        "make_events[0]": 1,
        "make_events[1]": 2,
        "clean_events[0]": 1,
        "clean_events[1]": 2,
        "user_totals": 1,
    }, story
    expected: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for event in range(1000):
        if (amount := event * 37 % 100) >= 10:
            expected[event % 7][0] += 1
            expected[event % 7][1] += amount
    assert rows(example_store, dag_id, run_id, "user_totals", ["user", "events", "amount"]) == sorted(
        (user, n, total) for user, (n, total) in expected.items()
    )
    # the partial/expand arguments reached the functions as given: ints, each shard its own
    shards = {
        row["shard"]
        for i in range(2)
        for row in read_table(example_store, RunRef(dag_id, run_id).parse(f"cleaned[{i}]")).to_pylist()
    }
    assert shards == {0, 1}
    [event] = stored_events(RecoveryJournal(example_store, RunRef(dag_id, run_id)))
    assert event["task"] == "clean_events[1]" and ["clean_events[1]", "make_events[1]"] in event["regions"]


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.s3
def test_checkpointed_stage_resumes_from_its_last_completed_micro_batch(
    live_airflow, example_runs, example_store
):
    #   make_readings --> scale_readings (checkpointed; fails inside micro-batch 2) --> hourly_totals
    run, tries, story = finish(live_airflow, example_runs, "checkpointed")
    dag_id, run_id = example_runs["checkpointed"]
    assert run["state"] == "success", story
    assert tries == {"make_readings": 1, "scale_readings": 2, "hourly_totals": 1}, story
    restores = [
        (e["try_number"], e["restored_from"], e["reason"])
        for e in stored_events(RecoveryJournal(example_store, RunRef(dag_id, run_id)))
        if e["kind"] == "checkpoint"
    ]
    assert [(t, k) for t, k, _ in restores[:2]] == [(1, None), (2, 1)], restores
    assert restores[1][2].startswith("scale_readings try 2 resumed at checkpoint 1: ")
    pushed = live_airflow.client.xcom_entries(dag_id, run_id, "scale_readings")["ft_partitions"]
    checkpoint = pushed["scaled"]["checkpoint"]
    assert checkpoint["why"] == "resume" and checkpoint["restored_from"] >= 1, checkpoint
    assert 0 < checkpoint["input_bytes_read"] < checkpoint["input_bytes"]
    scaled = rows(example_store, dag_id, run_id, "scaled", ["reading", "value"])
    assert scaled == [(i, (i * 7) % 100 * 10) for i in range(6000)]  # each reading once
    totals: dict[int, int] = defaultdict(int)
    for i in range(6000):
        totals[i % 24] += (i * 7) % 100 * 10
    assert rows(example_store, dag_id, run_id, "hourly_totals", ["hour", "total"]) == sorted(totals.items())


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.s3
@pytest.mark.parametrize(
    ("name", "strategy", "delays"),
    [
        ("fixed_delay", "FixedDelay", [4.0, 4.0]),
        ("exponential_delay", "ExponentialDelay", [1.0, 2.0]),  # initial 1 s, multiplier 2, no jitter
        ("failure_rate", "FailureRate", [2.0, 2.0]),
    ],
)
def test_restart_strategy_showcase(live_airflow, example_runs, example_store, name, strategy, delays):
    #   ingest (fails on tries 1 and 2) -- restarted after the strategy's delays, succeeds on try 3
    run, tries, story = finish(live_airflow, example_runs, name)
    dag_id, run_id = example_runs[name]
    assert run["state"] == "success", story
    assert tries == {"ingest": 3}, story
    events = stored_events(RecoveryJournal(example_store, RunRef(dag_id, run_id)))
    assert [e["try_number"] for e in events] == [1, 2], events
    assert all(e["restart"] and e["strategy"].startswith(strategy) for e in events), events
    assert [round(float(e["delay"]), 1) for e in events] == delays, events
    history = live_airflow.client.task_instance_tries(dag_id, run_id, "ingest")
    ends = [datetime.fromisoformat(t["end_date"]) for t in history[:-1]]
    starts = [datetime.fromisoformat(t["start_date"]) for t in history[1:]]
    for end, start, delay in zip(ends, starts, delays, strict=True):
        assert (start - end).total_seconds() >= delay - 0.5, (history, story)
    assert rows(example_store, dag_id, run_id, "ingested", ["key", "square"]) == [
        (k, k * k) for k in range(50)
    ]
