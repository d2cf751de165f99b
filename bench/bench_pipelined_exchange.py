"""A 150 MB pipelined exchange: kept in the Spark Connect server vs committed to S3 scratch and fetched.

    produce ~~rows (pipelined)~~> consume          (bench/exchange/dags.py, both on Spark Connect)

For each way, --runs runs one at a time (alternating, after a warm-up round): the region's wall time
(produce's start to consume's end, as Airflow records them), each stage's time, and the bytes the run
wrote to S3 under its scratch prefix. Printed and written to bench/results/pipelined_exchange.json.

    python bench/bench_pipelined_exchange.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.partitions import RunRef, StoreLayout  # noqa: E402
from bench.live_bench import live_bench  # noqa: E402

WAYS = {
    "in the Spark Connect server": "bench_exchange_engine",
    "through S3 scratch": "bench_exchange_scratch",
}


def times(client, dag_id: str, run_id: str) -> dict[str, float]:
    tis = {ti["task_id"]: ti for ti in client.task_instances(dag_id, run_id)}
    start = datetime.fromisoformat(tis["produce"]["start_date"])
    end = datetime.fromisoformat(tis["consume"]["end_date"])
    stage = {
        name: (
            datetime.fromisoformat(ti["end_date"]) - datetime.fromisoformat(ti["start_date"])
        ).total_seconds()
        for name, ti in tis.items()
    }
    return {"region_s": (end - start).total_seconds(), **{f"{name}_s": s for name, s in stage.items()}}


def scratch_bytes(s3, store_url: str, dag_id: str, run_id: str) -> int:
    layout = StoreLayout.from_url(store_url)
    prefix = layout.run_prefix(RunRef(dag_id, run_id)) + "scratch/"
    pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=layout.bucket, Prefix=prefix)
    return sum(obj["Size"] for page in pages for obj in page.get("Contents", ()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "pipelined_exchange.json")
    args = parser.parse_args()
    env = {"FT_BENCH_EXCHANGE_APPS": str(REPO / "bench" / "exchange")}
    with live_bench(
        "ft-bench-exchange",
        [REPO / "bench" / "exchange" / "dags.py"],
        env=env,
        server_conf={"spark.driver.memory": "2g"},
    ) as live:
        s3, store_url, airflow = live.s3, live.store_url, live.airflow
        client = airflow.client
        airflow.wait_for_dags(list(WAYS.values()), timeout=180)
        figures: dict[str, list[dict]] = {way: [] for way in WAYS}
        for n in range(args.runs + 1):
            for way, dag_id in WAYS.items():
                run_id = client.trigger_dag_run(dag_id, run_id=f"exchange_{n}")["dag_run_id"]
                final = client.wait_for_dag_run(dag_id, run_id, timeout=900)
                assert final["state"] == "success", airflow.describe_run(dag_id, run_id)
                if n:  # round 0 warms up
                    figures[way].append(
                        {
                            **times(client, dag_id, run_id),
                            "s3_scratch_bytes": scratch_bytes(s3, store_url, dag_id, run_id),
                        }
                    )
        result = {"runs": args.runs, "ways": {}}
        for way, rows in figures.items():
            median = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
            result["ways"][way] = {"median": median, "all": rows}
            print(
                f"{way:28} region {median['region_s']:6.1f} s (produce {median['produce_s']:.1f} s, consume "
                f"{median['consume_s']:.1f} s), written to S3: {median['s3_scratch_bytes'] / 1e6:.1f} MB"
            )
        engine, scratch = (result["ways"][w]["median"]["region_s"] for w in WAYS)
        result["region_time_ratio_engine_to_scratch"] = round(engine / scratch, 2)
        print(f"region time, engine / scratch: {result['region_time_ratio_engine_to_scratch']}")
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2))
        print(f"written to {args.output}")


if __name__ == "__main__":
    main()
