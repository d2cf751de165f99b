"""``airflow-ft`` answers a bad argument with one clear line, never a traceback, and changes nothing.

A --a--> B[0..1]          (B mapped over two map indexes)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_ft_provider.cli import main
from airflow_ft_provider.failover.graph import ResultPartitionType
from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output
from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.recovery.journal_schema import event_from_json
from ft_harness.data.journal_records import stored_events
from ft_harness.runners import HUNG_AFTER_SECONDS

pytestmark = pytest.mark.usefixtures("cli_logging")  # main() runs in this process

PIPELINE = PipelineDescription(
    "ft_cli_errors",
    [StageDeclaration("A", 1, (), (Output("a"),)), StageDeclaration("B", 2, (Input("a"),), (), mapped=True)],
)


@pytest.fixture
def dags(monkeypatch, s3_bucket):
    """The run's stored pipeline (as its first stage try stores it) in the S3 endpoint, the cluster's
    default store pointing there; the CLI reads nothing else."""
    endpoint = s3_bucket.endpoint
    monkeypatch.setenv(
        "AIRFLOW_CONN_AWS_DEFAULT",
        json.dumps(
            {
                "conn_type": "aws",
                "login": endpoint.access_key,
                "password": endpoint.secret_key,
                "extra": {"endpoint_url": endpoint.url, "region_name": endpoint.region},
            }
        ),
    )
    monkeypatch.setenv("AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL", s3_bucket.url)
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url)
    RecoveryJournal(store, RunRef("ft_cli_errors", "manual__1")).store_description(PIPELINE)
    return s3_bucket


def run(capsys, *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stopped:
        main(["restart-region", "--dag-id", "ft_cli_errors", "--run-id", "manual__1", *argv])
    return stopped.value.code, capsys.readouterr().err


@pytest.mark.parametrize("task", ["b[x]", "B[", "B[1", "B]0[", "B[-1]", "B [0]"])
def test_a_malformed_task_is_a_usage_error(capsys, dags, task):
    code, err = run(capsys, "--task", task)
    assert code == 2 and f"invalid task {task!r}" in err and "score[3]" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("task", "says"),
    [
        ("Z", "'Z' is not a task of pipeline 'ft_cli_errors'; tasks: A, B[0], B[1]"),
        ("B[7]", "'B[7]' is not a task of pipeline 'ft_cli_errors'"),
        ("A[0]", "'A[0]' is not a task of pipeline 'ft_cli_errors'"),
    ],
)
def test_a_task_the_pipeline_does_not_have_is_a_clear_error(capsys, dags, task, says):
    code, err = run(capsys, "--task", task)
    assert code == 1 and says in err and "Traceback" not in err


def test_a_run_without_a_stored_pipeline_is_a_clear_error_naming_the_store(capsys, dags):
    with pytest.raises(SystemExit) as stopped:
        main(["history", "--dag-id", "ft_cli_errors", "--run-id", "manual__2"])
    err = capsys.readouterr().err
    assert stopped.value.code == 1 and "Traceback" not in err
    assert "run 'manual__2' of DAG 'ft_cli_errors' has no stored pipeline in " + dags.url in err
    assert "pass --store" in err


def test_history_prints_the_stored_runs_events(capsys, dags):
    store = S3PartitionStore(dags.client(), dags.url)
    RecoveryJournal(store, RunRef("ft_cli_errors", "manual__1")).record(
        event_from_json({"time": 1.0, "kind": "manual", "task": "A"})
    )
    assert main(["history", "--dag-id", "ft_cli_errors", "--run-id", "manual__1"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["task"] == "A" and json.loads(line)["kind"] == "manual"
    assert json.loads(line)["time"] == "1970-01-01T00:00:01+00:00"


def airflow_ft(dags, *argv: str) -> subprocess.CompletedProcess[str]:
    """The installed console script, in a process of its own (Airflow's logging as a user gets it)."""
    endpoint = dags.endpoint
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_CONN_AWS_DEFAULT=json.dumps(
            {
                "conn_type": "aws",
                "login": endpoint.access_key,
                "password": endpoint.secret_key,
                "extra": {"endpoint_url": endpoint.url, "region_name": endpoint.region},
            }
        ),
        AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL=dags.url,
        AIRFLOW_HOME=os.environ.get("AIRFLOW_HOME", ""),
        AIRFLOW__CORE__LAZY_LOAD_PLUGINS=os.environ.get("AIRFLOW__CORE__LAZY_LOAD_PLUGINS", "True"),
    )
    script = str(Path(sys.executable).with_name("airflow-ft"))
    return subprocess.run(
        [script, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=HUNG_AFTER_SECONDS,
        stdin=subprocess.DEVNULL,
    )


def test_the_command_writes_only_results_to_stdout(dags, tmp_path, monkeypatch):
    """``airflow-ft history … | jq`` works: JSON lines with ISO times on stdout, logs on stderr; an
    error leaves stdout empty and exits 1; a usage error exits 2."""
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    # A warning Airflow prints while it is imported, before any logging setup of ours (seen on a
    # deployment whose plugins folder also held the failover plugin): it must not reach stdout either.
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "dup.py").write_text(
        "from airflow.plugins_manager import AirflowPlugin\n\n"
        "class Dup(AirflowPlugin):\n    name = 'ft_failover'\n"
    )
    monkeypatch.setenv("AIRFLOW__CORE__LAZY_LOAD_PLUGINS", "False")
    store = S3PartitionStore(dags.client(), dags.url)
    journal = RecoveryJournal(store, RunRef("ft_cli_errors", "manual__1"))
    journal.record(
        event_from_json(
            {
                "time": 1764000000.5,
                "kind": "failover",
                "task": "B[0]",
                "try_number": 1,
                "restart": True,
                "delay": 1.0,
                "restart_at": 1764000001.5,
            }
        )
    )
    journal.record(event_from_json({"time": 1764000009.0, "kind": "manual", "task": "A"}))
    done = airflow_ft(dags, "history", "--dag-id", "ft_cli_errors", "--run-id", "manual__1")
    assert done.returncode == 0, done.stderr
    assert "Plugin 'ft_failover' already registered" in done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]  # every line is JSON, nothing else
    assert [(e["task"], e["time"]) for e in events] == [
        ("B[0]", "2025-11-24T16:00:00.500000+00:00"),
        ("A", "2025-11-24T16:00:09+00:00"),
    ]
    assert events[0]["restart_at"] == "2025-11-24T16:00:01.500000+00:00"
    verbose = airflow_ft(dags, "-v", "history", "--dag-id", "ft_cli_errors", "--run-id", "manual__1")
    assert verbose.stdout == done.stdout and "S3 client for connection 'aws_default'" in verbose.stderr
    missing = airflow_ft(dags, "history", "--dag-id", "ft_cli_errors", "--run-id", "manual__9")
    assert (missing.returncode, missing.stdout) == (1, "") and "has no stored pipeline" in missing.stderr
    usage = airflow_ft(dags, "history", "--dag-id", "ft_cli_errors")
    assert (usage.returncode, usage.stdout) == (2, "") and "--run-id" in usage.stderr


def test_a_damaged_recovery_state_stops_a_restart_before_anything_is_cleared(capsys, dags):
    """The budget passes the state's schema but not the run's restart strategy (exponential-delay, the
    default with a store): the restart is refused, the state left as it was for repair."""
    store = S3PartitionStore(dags.client(), dags.url)
    journal = RecoveryJournal(store, RunRef("ft_cli_errors", "manual__1"))
    damaged = b'{"version": 1, "strategies": {"run": {"type": "exponential-delay", "attempt": "2"}}}'
    store.write_object(journal.state_key, damaged)
    code, err = run(capsys, "--task", "B[0]")
    assert code == 1 and "Traceback" not in err
    assert f"recovery state s3://{store.bucket}/{journal.state_key} is damaged" in err and "deleted" in err
    assert store.json_objects.get_bytes(journal.state_key).value == damaged and stored_events(journal) == []


# -- reading a run's results ------------------------------------------------------------------------------
#   A --a (blocking)--> B[0..1] --b (blocking)-->        A also writes p (pipelined: never stored)
RESULTS = PipelineDescription(
    "ft_cli_results",
    [
        StageDeclaration("A", 1, (), (Output("a"), Output("p", ResultPartitionType.PIPELINED))),
        StageDeclaration("B", 2, (Input("a"),), (Output("b"),), mapped=True),
    ],
)


def results(capsys, *argv: str) -> tuple[int, list[dict], str]:
    try:
        code = main([argv[0], "--dag-id", "ft_cli_results", "--run-id", "manual__r", *argv[1:]])
    except SystemExit as stopped:
        code = stopped.code
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


def test_partitions_and_show_read_a_runs_results_through_the_stores_checks(capsys, dags, tmp_path):
    import time

    import pyarrow.parquet as pq

    from airflow_ft_provider.partitions import Producer
    from airflow_ft_provider.partitions.parquet import commit_table

    store = S3PartitionStore(dags.client(), dags.url)
    run = RunRef("ft_cli_results", "manual__r")
    journal = RecoveryJournal(store, run)
    journal.store_description(RESULTS)
    commit_table(
        store,
        run.parse("a"),
        [{"x": 1, "day": "mon"}, {"x": 2, "day": "tue"}, {"x": 3, "day": "wed"}],
        producer=Producer("A"),
    )
    journal.record(  # C failed on a missing b[0]: the decision found it lost, B[0]'s try 2 rebuilt it
        event_from_json(
            {
                "time": time.time() + 5,
                "kind": "failover",
                "task": "C",
                "try_number": 1,
                "unavailable": ["b[0]"],
            }
        )
    )
    commit_table(store, run.parse("b[0]"), [{"y": 10}], producer=Producer("B", 0, 2))

    code, lines, err = results(capsys, "partitions")
    assert code == 0, err
    by_id = {line["partition"]: line for line in lines}
    assert [line["partition"] for line in lines] == ["a", "p", "b[0]", "b[1]"]
    assert {
        p: (line["state"], line["producer"], line["producer_try"], line["rows"]) for p, line in by_id.items()
    } == {
        "a": ("reused", "A", 1, 3),
        "p": ("pipelined", "A", None, None),
        "b[0]": ("rebuilt", "B[0]", 2, 1),
        "b[1]": ("missing", "B[1]", None, None),
    }
    assert by_id["a"]["bytes"] > 0 and by_id["a"]["committed_at"].endswith("+00:00")

    assert results(capsys, "show", "a")[1] == [
        {"x": 1, "day": "mon"},
        {"x": 2, "day": "tue"},
        {"x": 3, "day": "wed"},
    ]
    assert results(capsys, "show", "a", "--limit", "1")[1] == [{"x": 1, "day": "mon"}]
    code, [summary], _ = results(capsys, "show", "a", "--parquet", str(tmp_path / "a.parquet"))
    assert code == 0 and summary["rows"] == 3 and pq.read_table(tmp_path / "a.parquet").num_rows == 3
    for partition, says in (
        ("b[1]", "partition 'b[1]'"),
        ("p", "is pipelined"),
        ("z", "partitions: a, p, b[0], b[1]"),
    ):
        code, lines, err = results(capsys, "show", partition)
        assert (code, lines) == (1, []) and says in err and "Traceback" not in err, err
    # B[1] failed before it committed anything: its try 2's commit is its first, nothing was rebuilt
    journal.record(
        event_from_json({"time": time.time() + 6, "kind": "failover", "task": "B[1]", "try_number": 1})
    )
    commit_table(store, run.parse("b[1]"), [{"y": 11}], producer=Producer("B", 1, 2))
    listed = {
        line["partition"]: (line["state"], line["producer_try"]) for line in results(capsys, "partitions")[1]
    }
    assert listed["b[1]"] == ("committed", 2) and listed["b[0]"] == ("rebuilt", 2)

    # A same-size corruption of a's data: show reads through the checksums and refuses it. (The listing
    # checks manifests and sizes, as the failover page does; a cut object is listed as corrupt.)
    key = store.layout.partition_prefix(run.parse("a")) + store.manifest(run.parse("a")).files[0].key
    body = store.read_object(key)
    store.write_object(key, bytes([body[0] ^ 0xFF]) + body[1:], content_type="application/octet-stream")
    code, lines, err = results(capsys, "show", "a")
    assert (code, lines) == (1, []) and "checksum" in err
    store.write_object(key, body[: len(body) // 2], content_type="application/octet-stream")
    assert {line["partition"]: line["state"] for line in results(capsys, "partitions")[1]}["a"] == "corrupt"
