"""Deterministic test orders, shared by the Spark applications and the tests that check their output."""


def orders(shard: int = 0, shards: int = 1, count: int = 120) -> list[dict]:
    rows = []
    for i in range(shard, count, shards):
        rows.append(
            {
                "order_id": i,
                "customer": f"c{i % 7}",
                "day": f"2026-11-{1 + i % 5:02d}",
                "amount": (i * 37) % 100 + 1,
            }
        )
    return rows


def daily_revenue(rows: list[dict]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for row in rows:
        totals[row["day"]] = totals.get(row["day"], 0) + row["amount"]
    return totals
