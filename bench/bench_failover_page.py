"""The failover page's store reads at 1,000 partitions: the first load against a reload (issue 45).

    python bench/bench_failover_page.py [--partitions 1000] [--rounds 3]

The page's data (``plugins/app.py``) is one availability check of the run's partitions (a listing of
the run's prefix, then each manifest) plus the page's rows (``plugins/run_view.build_run_view``). Seeds
--partitions small committed partitions in a moto server, then times side by side, in one run: the
listing alone (the floor), the first check (every manifest read: a fresh API server), and the checks
after it (manifests unchanged since are answered from the process's cache by their ETag,
``partitions/manifest_cache.py``), each with the page's rows built from the report. Medians of
--rounds. Writes bench/results/failover_page.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.failover.failure_handler import FailoverState  # noqa: E402
from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration  # noqa: E402
from airflow_ft_provider.model.exchanges import Output  # noqa: E402
from airflow_ft_provider.partitions import RunRef, S3PartitionStore  # noqa: E402
from airflow_ft_provider.partitions.manifest_cache import MANIFESTS  # noqa: E402
from airflow_ft_provider.plugins.run_view import build_run_view  # noqa: E402
from bench.bench_partition_store import RUN_ID, seed_partitions  # noqa: E402
from ft_harness.services.s3_server import start_moto_server  # noqa: E402

RESULTS = REPO / "bench" / "results" / "failover_page.json"


def timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    value = action()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = start_moto_server(auth=False)
    try:
        client = server.client()
        client.create_bucket(Bucket="ft-bench-page")
        store = S3PartitionStore(client, "s3://ft-bench-page/pipelines/")
        print(f"seeding {args.partitions} partitions ...", flush=True)
        ids = seed_partitions(client, store, args.partitions)
        description = PipelineDescription(
            "bench", [StageDeclaration("p", args.partitions, (), (Output("avail"),), mapped=True)]
        )
        tasks = [
            {"task_id": "p", "map_index": i, "state": "success", "try_number": 1}
            for i in range(args.partitions)
        ]
        prefix = store.layout.blocking_prefix(RunRef("bench", RUN_ID))

        def page() -> dict:
            report = store.check_availability("bench", RUN_ID, ids)
            assert len(report.available) == args.partitions, report.unavailable
            return build_run_view(
                description, RUN_ID, task_instances=tasks, state=FailoverState(), events=[], report=report
            )

        figures: dict[str, list[float]] = {"listing only": [], "first load": [], "reload": []}
        for _ in range(args.rounds):
            figures["listing only"].append(timed(lambda: store.objects.list_under(prefix))[0])
            MANIFESTS.clear()  # a fresh API server
            figures["first load"].append(timed(page)[0])
            figures["reload"].append(timed(page)[0])
        medians = {k: round(statistics.median(v), 3) for k, v in figures.items()}
        result = {
            "partitions": args.partitions,
            "rounds": args.rounds,
            "median_s": medians,
            "all_s": {k: [round(x, 3) for x in v] for k, v in figures.items()},
            "reload_vs_first_load": round(medians["reload"] / medians["first load"], 3),
        }
        for label, median in medians.items():
            print(f"  {label:14} {median:7.3f} s  (x{median / medians['first load']:.2f} the first load)")
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {RESULTS.relative_to(REPO)}")
    finally:
        server.process.terminate() if server.process else None


if __name__ == "__main__":
    main()
