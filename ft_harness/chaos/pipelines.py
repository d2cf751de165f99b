"""The pipelines chaos runs: which tasks a fault may name, which blocking partition a consumer reads
(to delete or truncate before it does), which partitions are checked deeply, and the output a
failure-free run has, computed in plain Python.

* ``ORDERS``: ``ft_example_orders_etl`` (literal stages; ``orders_expected.py``);
* ``DAILY_FILES``: ``ft_example_daily_files`` over five files: two stages mapped over an upstream
  task's output, one pipelined region per file, their counts known only at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.partitions.parquet import read_table
from ft_harness.chaos import orders_expected


@dataclass(frozen=True)
class ChaosPipeline:
    dag_id: str
    stages: tuple[str, ...]  # the tasks a fault may name (core ids: stage or stage[i])
    blocking_inputs: Mapping[str, str]  # consumer task -> a blocking partition it reads
    blocking: tuple[str, ...]  # the partitions a finished run must hold intact
    expected: Callable[[], object]
    actual: Callable[[S3PartitionStore, str], object]  # (store, run id) -> what the run output
    conf: Mapping[str, object] = field(default_factory=dict)  # the run's conf besides its faults


ORDERS = ChaosPipeline(
    orders_expected.DAG_ID,
    stages=("generate_orders", "clean_orders", "enrich_orders", "daily_revenue", "customer_aggregates"),
    blocking_inputs={
        "clean_orders": "raw_orders",
        "daily_revenue": "enriched_orders",
        "customer_aggregates": "enriched_orders",
    },
    blocking=("raw_orders", "enriched_orders", "daily_revenue", "customer_aggregates"),
    expected=orders_expected.expected_outputs,
    actual=orders_expected.actual_outputs,
)

FILES = 5
LINES_PER_FILE = 10  # dags_examples/daily_files.py


def expected_report(files: int = FILES) -> list[tuple[str, int, int]]:
    """``ft_example_daily_files``'s report: per file, 10 lines scored 2 * (line + 100 * n)."""
    return sorted(
        (f"orders-{n:04d}.csv", LINES_PER_FILE, sum(2 * (line + 100 * n) for line in range(LINES_PER_FILE)))
        for n in range(files)
    )


def actual_report(store: S3PartitionStore, run_id: str) -> list[tuple[str, int, int]]:
    rows = read_table(store, RunRef("ft_example_daily_files", run_id).parse("report")).to_pylist()
    return sorted((r["file"], r["lines"], r["score"]) for r in rows)


DAILY_FILES = ChaosPipeline(
    "ft_example_daily_files",
    stages=(
        *(f"parse_file[{i}]" for i in range(FILES)),
        *(f"score_file[{i}]" for i in range(FILES)),
        "daily_report",
    ),
    blocking_inputs={"daily_report": "scores[2]"},
    blocking=(*(f"scores[{i}]" for i in range(FILES)), "report"),
    expected=expected_report,
    actual=actual_report,
    conf={"files": FILES},
)
