"""The in-application I/O module in a real local Spark: declared inputs in, declared outputs out."""

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_ft_provider.spark.spec import OUTPUT_MARKER, InputPartition, InputSpec, OutputSpec, StageSpec
from ft_harness.services.spark_env import spark_environment

pytestmark = pytest.mark.spark

APP = Path(__file__).resolve().parents[2] / "apps" / "stage_io_probe.py"
CONTENT_APP = Path(__file__).resolve().parents[2] / "apps" / "content_probe.py"


def test_stage_io_reads_declared_inputs_writes_outputs_and_refuses_misuse(tmp_path):
    #   orders[0], orders[1] (two Parquet partitions) --> probe app --> totals (one output)
    files = []
    for index, rows in enumerate(([("ann", 10), ("bob", 5)], [("ann", 1), ("cy", 7)])):
        path = tmp_path / f"orders-{index}.parquet"
        pq.write_table(pa.table({"customer": [r[0] for r in rows], "amount": [r[1] for r in rows]}), path)
        files.append(path)
    out_dir = tmp_path / "staging" / "totals"
    spec = StageSpec(
        pipeline="p",
        run_id="manual__2026-11-22T04:00:00+00:00",
        stage="probe",
        map_index=1,
        try_number=1,
        inputs={
            "orders": InputSpec(
                "orders",
                "blocking",
                [InputPartition(f"orders[{i}]", [f"file://{f}"]) for i, f in enumerate(files)],
            )
        },
        outputs={"totals": OutputSpec("totals", "blocking", f"file://{out_dir}", compression="zstd")},
    )
    env = {**spark_environment(), "FT_STAGE_SPEC": spec.encode()}
    run = subprocess.run(
        ["spark-submit", "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(APP)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = dict(line.split(" ", 2)[1:] for line in run.stdout.splitlines() if line.startswith("RESULT "))
    assert results["rows_in"] == "4"
    assert results["map_index"] == "1"
    # The write's rows come from the Parquet footers on this disk, and its checksum from the write's
    # own observed metrics: no Spark job beyond what the same plain Parquet write runs.
    assert results["write_jobs"] == results["plain_write_jobs"], results
    assert "did not declare" in results["undeclared"] and "'customers'" in results["undeclared"]
    assert "writes output 'totals' twice" in results["twice"]

    marker = json.loads((out_dir / OUTPUT_MARKER).read_text())
    content = marker.pop("content")  # the rows' checksum (test below)
    assert marker == {"result": "totals", "rows": 3, "format": "parquet"}
    assert content.startswith("rows1:"), content
    parts = sorted(out_dir.glob("part-*.parquet"))
    assert parts and all(
        pq.ParquetFile(p).metadata.row_group(0).column(0).compression == "ZSTD"
        for p in parts
        if pq.ParquetFile(p).metadata.num_row_groups
    )
    table = pa.concat_tables([pq.read_table(p) for p in parts]).to_pylist()
    assert sorted((r["customer"], r["total"]) for r in table) == [("ann", 11), ("bob", 5), ("cy", 7)]


def test_the_row_checksum_ignores_order_and_files_and_sees_any_change(tmp_path):
    #   the same 1,000 rows in 1 file and shuffled into 7; one value changed; a row duplicated; a
    #   column renamed; a map column (Spark cannot hash maps); no rows
    run = subprocess.run(
        [
            "spark-submit",
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            str(CONTENT_APP),
            str(tmp_path),
        ],
        env=spark_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    sums = dict(line.split(" ", 2)[1:] for line in run.stdout.splitlines() if line.startswith("RESULT "))
    assert sums["one_file"] == sums["shuffled"], sums
    assert sums["one_file"].startswith("rows1:") and len(sums["one_file"]) == len("rows1:") + 32
    others = [sums[k] for k in ("one_value_changed", "a_row_duplicated", "a_column_renamed", "empty")]
    assert len({sums["one_file"], *others}) == 5, sums
    assert sums["with_a_map"] == "None"
