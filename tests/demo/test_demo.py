"""The demo command's non-interactive mode, end to end (the same code path as scripts/demo.sh).

    generate_orders --> [clean_orders (fails once) ~~> enrich_orders] --enriched_orders (lost)--> daily_revenue
                                                                                             \\-> customer_aggregates

The demo runs against the session's S3 endpoint (FT_DEMO_S3_ENDPOINT) and keeps its AIRFLOW_HOME, so
that this test can check the printed report against the facts: the task tries in Airflow's metadata
DB, the events of the recovery journal and the partition manifests in S3.
"""  # noqa: E501  (a drawing)

from __future__ import annotations

import re
import sqlite3
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.data.journal_records import stored_events

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "ft_example_orders_etl"


@pytest.fixture(scope="module")
def demo(background_demo):
    """The demo started at the beginning of the session (ft_harness/runners/background_demo.py)."""
    returncode, output = background_demo.result()
    return subprocess.CompletedProcess(
        background_demo.process.args, returncode, output, ""
    ), background_demo.home


def section(report: str, title: str) -> list[str]:
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        out.append(line)
    return out


def test_demo_recovers_and_reports_what_really_happened(demo, s3_endpoint):
    result, home = demo
    out = result.stdout
    assert result.returncode == 0, out[-8000:] + result.stderr[-4000:]
    assert "RESULT: OK" in out
    assert "Stopped everything." in out

    store_url = re.search(r"partition store: (s3://\S+)", out).group(1)
    faulty = re.search(r"run with faults: (\S+)", out).group(1)
    reference = re.search(r"failure-free:\s+(\S+)", out).group(1)
    store = S3PartitionStore(s3_endpoint.client(), store_url)
    run = RunRef(DAG_ID, faulty)

    # Task runs: the report's table is what Airflow's metadata DB says.
    with sqlite3.connect(home / "airflow.db") as db:

        def tries(run_id):
            return {
                task: n
                for task, n in db.execute(
                    "SELECT task_id, try_number FROM task_instance WHERE dag_id = ? AND run_id = ?",
                    (DAG_ID, run_id),
                )
            }

        actual, actual_ref = tries(faulty), tries(reference)
    table = {}
    for line in section(out, "Task runs"):
        match = re.fullmatch(r"\s+(\S+)\s+(\d+)\s+(\d+)", line)
        if match and match.group(1) != "total":
            table[match.group(1)] = (int(match.group(2)), int(match.group(3)))
    assert table == {task: (actual[task], actual_ref[task]) for task in actual}
    assert set(actual_ref.values()) == {1}
    assert actual["generate_orders"] == 1  # its partition was re-used, never recomputed
    assert actual["clean_orders"] >= 2 and actual["enrich_orders"] >= 2 and actual["customer_aggregates"] >= 2

    # Failures: one report entry per journal event, same task, try, cause and regions.
    events = [e for e in stored_events(RecoveryJournal(store, run)) if e["kind"] == "failover"]
    failures = section(out, "Failures and failover decisions")
    headers = [line for line in failures if re.match(r"\s+#\d+ ", line)]
    assert len(headers) == len(events) >= 2
    for header, event in zip(headers, events, strict=True):
        stamp = datetime.fromtimestamp(event["time"]).strftime("%H:%M:%S")
        assert f"{stamp}  {event['task']} try {event['try_number']} failed: {event['cause'][:100]}" in header
    printed_regions = [
        line.split("restart region [", 1)[1].split("]", 1)[0]
        for line in failures
        if "restart region [" in line
    ]
    assert printed_regions == [", ".join(r) for e in events if e["restart"] for r in e["regions"]]
    delays = [float(m) for m in re.findall(r"restart after ([\d.]+) s", "\n".join(failures))]
    assert delays == [round(float(e["delay"]), 1) for e in events if e["restart"]]
    first_of = {}
    for event in events:
        first_of.setdefault(event["task"], event)
    assert "InjectedFailure" in first_of["clean_orders"]["cause"]
    # Both consumers of the lost partition restart clean_orders at once: the try one of them ends is
    # never mistaken for a killed process (no phantom failure, no budget spent on it).
    assert not any("process was killed" in e["cause"] for e in events), [e["cause"] for e in events]
    lost = next(e for e in events if "enriched_orders" in e["unavailable"])
    # The narration names the consumer that met the lost file, as the journal recorded it
    assert f"meets PartitionNotFound (this run: {lost['task']})" in out, out
    assert lost["task"] in ("daily_revenue", "customer_aggregates")
    assert ["clean_orders", "enrich_orders"] in lost["regions"]
    assert "produced the lost partition enriched_orders (backtracking)" in out
    lost_lines = [line for line in failures if "lost partitions" in line]
    assert lost_lines and all(line.rsplit(": ", 1)[1] == "enriched_orders" for line in lost_lines), failures

    # Partitions: reused / rebuilt as the manifests say.
    parts = {}
    for line in section(out, "Partitions of the run with faults"):
        match = re.match(
            r"\s+(\S+)\s+(blocking|pipelined)\s+(\d+) rows\s+(reused|rebuilt|recomputed|written once)", line
        )
        if match:
            parts[match.group(1)] = (match.group(2), int(match.group(3)), match.group(4))
    assert set(parts) == {
        "raw_orders",
        "cleaned_orders",
        "enriched_orders",
        "daily_revenue",
        "customer_aggregates",
    }
    for partition, (kind, rows, verdict) in parts.items():
        if kind == "blocking":
            manifest = store.manifest(run.parse(partition))
            assert rows == manifest.row_count
            # rebuilt: found lost by a decision, then committed again; a first commit on a later try
            # (the earlier ones failed or were cleared before committing) was written once
            lost = partition == "enriched_orders"
            assert (verdict == "rebuilt") == lost, (partition, verdict)
            assert manifest.producer.try_number > 1 or verdict != "rebuilt", (partition, verdict)
    assert parts["raw_orders"][2] == "reused"
    assert parts["enriched_orders"][2] == "rebuilt"
    assert parts["cleaned_orders"][2] == "recomputed"

    # The outputs were compared, and are equal.
    compared = section(out, "Final outputs compared")
    assert any(line.split()[:2] == ["daily_revenue", "identical"] for line in compared)
    assert any(line.split()[:2] == ["customer_aggregates", "identical"] for line in compared)
