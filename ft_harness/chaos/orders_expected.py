"""What ``ft_example_orders_etl`` must output, computed in plain Python (see dags_examples/jobs/).

Used by the example test and the chaos runs: a run's final partitions are compared with this, so a
run that "succeeds" with wrong or partial data is caught.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta

from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.parquet import read_table

DAG_ID = "ft_example_orders_etl"
COLUMNS = {
    "daily_revenue": ["day", "orders", "revenue_cents"],
    "customer_aggregates": ["customer_id", "orders", "spent_cents", "large_orders", "first_day", "last_day"],
}


def expected_orders() -> list[tuple[int, str, int]]:
    """The enriched orders: (customer, day, total cents)."""
    out = []
    for i in range(240):
        if i % 11 == 0 or i % 4 == 0:
            continue
        amount = (i % 4) * (500 + (i * 37) % 2000)
        total = amount + amount * 8 // 100
        out.append((i % 13, (date(2026, 1, 1) + timedelta(days=i % 7)).isoformat(), total))
    return out


def expected_outputs() -> dict[str, list[tuple]]:
    daily, customers = defaultdict(lambda: [0, 0]), defaultdict(lambda: [0, 0, 0, "9", "0"])
    for customer, day, total in expected_orders():
        daily[day][0] += 1
        daily[day][1] += total
        c = customers[customer]
        c[0], c[1], c[2] = c[0] + 1, c[1] + total, c[2] + (total >= 5000)
        c[3], c[4] = min(c[3], day), max(c[4], day)
    return {
        "daily_revenue": sorted((day, n, s) for day, (n, s) in daily.items()),
        "customer_aggregates": sorted((cid, *values) for cid, values in customers.items()),
    }


def actual_outputs(store, run_id: str) -> dict[str, list[tuple]]:
    run = RunRef(DAG_ID, run_id)
    return {
        result: sorted(
            tuple(row[c] for c in columns) for row in read_table(store, run.parse(result)).to_pylist()
        )
        for result, columns in COLUMNS.items()
    }
