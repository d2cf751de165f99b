"""The failover page's store reads at 1,000 partitions: its first answer, how long until it is
complete, and a reload; and ``airflow-ft partitions``, a new process each time (issue 45).

    python bench/bench_failover_page.py [--partitions 1000] [--rounds 3]

The page's data (``plugins/app.py``) is one availability check of the run's partitions (a listing of
the run's prefix, then each manifest) plus the page's rows (``plugins/run_view.build_run_view``). Seeds
--partitions small committed partitions in a moto server, then times side by side, in one run, on a
fresh API server (an empty manifest cache): the listing alone (the floor); a check that reads every
manifest before it answers (the page before the budget); the route's first answer, which waits
``MANIFEST_BUDGET`` for manifests and shows the rest as "listed"; the time until an answer has nothing
pending, asked again a second after each (as the page's script does; the reads went on meanwhile and
fill the process's manifest cache, ``partitions/manifest_cache.py``); and a reload. Then the CLI's
``partitions`` (``run_results.list_partitions``, every manifest before it prints): the first time (an
empty disk tier) and again (a new process: nothing in memory, the disk tier from the first). All of
that is a run still going, without a manifest index. Then the run ends: the time its end callback takes
to index the manifests (``partitions/manifest_index.py``), and on a fresh process the page's first
answer and the CLI's first ``partitions``, each now one listing and one GET. Medians of --rounds.
Writes bench/results/failover_page.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_ft_provider.failover.failure_handler import FailoverState  # noqa: E402
from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration  # noqa: E402
from airflow_ft_provider.model.exchanges import Output  # noqa: E402
from airflow_ft_provider.partitions import RunRef, S3PartitionStore  # noqa: E402
from airflow_ft_provider.partitions.manifest_cache import MANIFESTS, DiskTier  # noqa: E402
from airflow_ft_provider.partitions.s3_models import boto3_session  # noqa: E402
from airflow_ft_provider.plugins.app import MANIFEST_BUDGET  # noqa: E402
from airflow_ft_provider.plugins.run_view import build_run_view  # noqa: E402
from airflow_ft_provider.run_results import list_partitions  # noqa: E402
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
    parser.add_argument("--budget", type=float, default=MANIFEST_BUDGET, help="seconds for manifests")
    args = parser.parse_args()
    server = start_moto_server(auth=False)
    try:
        # the client the API server's store has: a session of partitions/s3_models (its timestamp parser)
        session = boto3_session(
            aws_access_key_id=server.access_key,
            aws_secret_access_key=server.secret_key,
            region_name=server.region,
        )
        client = session.client("s3", endpoint_url=server.url)
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

        def page(budget: float | None = None) -> dict:
            report = store.check_availability("bench", RUN_ID, ids, budget=budget, index=True)  # the route's
            assert len(report.available) + len(report.pending) == args.partitions, report.unavailable
            return build_run_view(
                description, RUN_ID, task_instances=tasks, state=FailoverState(), events=[], report=report
            )

        def until_complete() -> int:
            """The page's answers, asked again a second after each one with partitions pending (as the
            page's script does), until one has none; how many answers it took."""
            answers = 1
            while page(args.budget)["partitions_pending"]:
                time.sleep(1.0)
                answers += 1
            return answers

        figures: dict[str, list[float]] = {
            "listing only": [],
            "every manifest": [],
            "first answer": [],
            "complete": [],
            "reload": [],
            "cli, first": [],
            "cli, again": [],
            "run end: index": [],
            "ended: first answer": [],
            "ended: cli, first": [],
        }
        run = RunRef("bench", RUN_ID)
        index_key = store.indexes.key(run)
        pending, answers, ended_pending = [], [], []
        for _ in range(args.rounds):
            client.delete_object(Bucket="ft-bench-page", Key=index_key)  # a run still going: no index
            figures["listing only"].append(timed(lambda: store.objects.list_under(prefix))[0])
            MANIFESTS.clear()  # a fresh API server, reading every manifest before it answers
            figures["every manifest"].append(timed(page)[0])
            MANIFESTS.clear()  # a fresh API server, answering within its budget (the route's way)
            started = time.perf_counter()
            seconds, first = timed(lambda: page(args.budget))
            figures["first answer"].append(seconds)
            pending.append(first["partitions_pending"])
            time.sleep(1.0)
            answers.append(1 + until_complete())
            figures["complete"].append(time.perf_counter() - started)
            figures["reload"].append(timed(lambda: page(args.budget))[0])
            with tempfile.TemporaryDirectory() as cache:
                MANIFESTS.clear()  # airflow-ft partitions, the first time
                MANIFESTS.disk = DiskTier(Path(cache))
                seconds, lines = timed(lambda: list_partitions(description, store, RUN_ID))
                assert sum(line.state == "committed" for line in lines) == args.partitions
                figures["cli, first"].append(seconds)
                MANIFESTS.clear()  # and again: a new process
                figures["cli, again"].append(timed(lambda: list_partitions(description, store, RUN_ID))[0])
                MANIFESTS.disk = None
            # The run ends: its end callback indexes the manifests (run_end.py); then the same reads
            figures["run end: index"].append(timed(lambda: store.write_manifest_index(run))[0])
            MANIFESTS.clear()
            seconds, first = timed(lambda: page(args.budget))
            figures["ended: first answer"].append(seconds)
            ended_pending.append(first["partitions_pending"])
            with tempfile.TemporaryDirectory() as cache:
                MANIFESTS.clear()
                MANIFESTS.disk = DiskTier(Path(cache))
                seconds, lines = timed(lambda: list_partitions(description, store, RUN_ID))
                assert sum(line.state == "committed" for line in lines) == args.partitions
                figures["ended: cli, first"].append(seconds)
                MANIFESTS.disk = None
        medians = {k: round(statistics.median(v), 3) for k, v in figures.items()}
        result = {
            "partitions": args.partitions,
            "rounds": args.rounds,
            "median_s": medians,
            "all_s": {k: [round(x, 3) for x in v] for k, v in figures.items()},
            "budget_s": args.budget,
            "first_answer_pending": pending,
            "ended_first_answer_pending": ended_pending,
            "answers_until_complete": answers,
        }
        for label, median in medians.items():
            print(f"  {label:20} {median:7.3f} s")
        left, asked = statistics.median(pending), statistics.median(answers)
        print(f"  the first answer left {left:.0f} of {args.partitions} partitions pending; "
              f"complete after {asked:.0f} answers, a second apart")  # fmt: skip
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {RESULTS.relative_to(REPO)}")
    finally:
        server.process.terminate() if server.process else None


if __name__ == "__main__":
    main()
