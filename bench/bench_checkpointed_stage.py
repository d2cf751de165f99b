"""A checkpointed stage against the same stage restarted from scratch, on local Spark (a Spark Connect
server, local[2]) and a moto S3 server over HTTP, side by side in one run.

    python bench/bench_checkpointed_stage.py [--rows 20000000] [--batches 10] [--overhead-batches 4]
                                             [--fail-at 0.8] [--runs 3]

``numbers`` writes ``--rows`` rows (40 Parquet files); ``squares`` reads them and writes each row with
its square. Variants, each on a fresh run of the same DAG:

- plain: ``squares`` as an ordinary stage (``io.read`` / ``io.write``), failure-free;
- checkpointed: ``squares`` checkpointed (``--batches`` micro-batches: interval-volume = input/batches),
  failure-free: the overhead of checkpointing; again with ``--overhead-batches`` (fewer, larger
  micro-batches: a checkpoint costs a fixed part per micro-batch);
- resumed: checkpointed, failing inside the micro-batch at ``--fail-at`` of its input; the retry resumes
  from the last checkpoint;
- from scratch: the same failure, but the retry finds no checkpoint (both copies removed before it), as
  a stage without checkpoints restarts.

Every variant but the slow sink runs ``--runs`` times, in rounds (one of each per round, so that a
slower stretch of the machine hits them all); the figures are the medians. Figures: wall times, the
retry's wall, the input read again by the retry that the failed try had read
already (work redone), and the ratios. Writes bench/results/checkpointed_stage.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ft_harness.services.s3_server import start_moto_server, stop_moto_server  # noqa: E402
from ft_harness.services.spark_connect import SparkConnectServer  # noqa: E402

RESULTS = REPO / "bench" / "results" / "checkpointed_stage.json"
FILES = 40
ROWS = 20_000_000


def numbers(spark, io):
    io.write("numbers", spark.range(0, ROWS, numPartitions=FILES).selectExpr("id", "id % 13 AS k"))


def squares_plain(spark, io):
    io.write("squares", io.read("numbers").selectExpr("id", "id * id AS sq", "k"))


def squares_checkpointed(spark, io):
    io.write_stream("squares", io.read_stream("numbers").selectExpr("id", "id * id AS sq", "k"))


SLOW_SECONDS_PER_ROW = 3e-6  # about 4x the stage's own work per row: the whole stage 5x slower


def squares_slow_sink(spark, io):
    def slow(batches):  # shipped to the Spark server by value
        import time

        for batch in batches:
            time.sleep(batch.num_rows * SLOW_SECONDS_PER_ROW)
            yield batch

    stream = io.read_stream("numbers").selectExpr("id", "id * id AS sq", "k")
    io.write_stream("squares", stream.mapInArrow(slow, stream.schema))


class TaskInstance(types.SimpleNamespace):
    def xcom_push(self, key, value):
        self.pushed[key] = value

    def xcom_pull(self, **kwargs):
        return None


def build(dag_id: str, store_url: str, *, checkpointed: bool, volume: int, slow_interval: str | None = None,
          data_path: str = "staged"):  # fmt: skip
    from airflow.sdk import DAG

    from airflow_ft_provider.operators.spark_stage import SparkStageOperator
    from airflow_ft_provider.pipeline import FailoverPipeline

    with DAG(dag_id, schedule=None) as dag:
        with FailoverPipeline(
            store=store_url,
            spark_conn_id="ft_bench_connect",
            data_path=data_path,
            restart_strategy={
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": 5,
                "restart-strategy.fixed-delay.delay": "0 s",  # the retry's own work, no backoff
            },
        ):
            SparkStageOperator(task_id="numbers", python_callable=numbers, outputs=["numbers"])
            SparkStageOperator(
                task_id="squares",
                python_callable=squares_slow_sink
                if slow_interval
                else squares_checkpointed
                if checkpointed
                else squares_plain,
                inputs=["numbers"],
                outputs=["squares"],
                checkpointing={
                    "execution.checkpointing.interval-volume": volume,
                    **({"execution.checkpointing.interval": slow_interval} if slow_interval else {}),
                }
                if checkpointed
                else None,
            )
    return dag


def run(dag, task_id: str, try_number: int, faults=()) -> tuple[float, dict | None]:
    """One try as the task runner makes it; (wall seconds, the try's ft_partitions XCom or None)."""
    operator = dag.task_dict[task_id]
    ti = TaskInstance(map_index=-1, try_number=try_number, pushed={}, task_id=task_id, dag_id=dag.dag_id)
    context = {
        "ti": ti,
        "dag": dag,
        "run_id": "manual__bench",
        "dag_run": types.SimpleNamespace(conf={"ft_faults": list(faults)}),
        "params": {},
    }
    started = time.perf_counter()
    try:
        operator.execute(context)
    except Exception as failure:  # noqa: BLE001 - the failed try is part of what is measured
        if not faults or try_number > 1:
            raise
        print(f"   {task_id} try {try_number} failed as injected: {str(failure)[:80]}")
        operator.retry_policy.evaluate(failure, try_number, 5, context)  # as the task runner does
    finally:
        operator.__dict__.pop("store", None)
    return time.perf_counter() - started, ti.pushed.get("ft_partitions")


def failing_batch(sizes: list[int], volume: int, share: float) -> int:
    """The micro-batch that reads the input at ``share`` of the bytes, as the feeder cuts the input
    when nothing slows it down: one file (the probe), then as many files as ``volume`` admits."""
    bounds, batch, total, chunk = [], [], 0, 0
    for size in sizes:
        limit = sizes[0] if not bounds else volume
        if batch and chunk + size > limit:
            bounds.append(total)
            batch, chunk = [], 0
        batch.append(size)
        chunk += size
        total += size
    bounds.append(total)
    return next(i for i, end in enumerate(bounds) if end >= share * total)


def read_through_failed_batch(store, checkpoints: Path, dag_id: str, batch: int) -> int:
    """The input the failed try had read, its failing micro-batch included (its file-source log, the
    sizes from the input's manifest)."""
    from airflow_ft_provider.checkpoints.local import LocalCheckpoint
    from airflow_ft_provider.partitions import RunRef

    run = RunRef(dag_id, "manual__bench")
    local = LocalCheckpoint(checkpoints, run, "squares")
    local.input_sizes = {f"numbers-0/{f.name}": f.size for f in store.manifest(run.parse("numbers")).files}
    return local.bytes_read_through(batch)


def variant(name: str, store_url: str, checkpoints: Path, *, checkpointed: bool, volume: int, fail_batch=None,
            scratch=False, slow_interval=None, round_number=0, data_path="staged") -> dict:  # fmt: skip
    dag_id = f"bench_ckpt_{name.replace(' ', '_').replace('/', '_')}_{round_number}"
    dag = build(
        dag_id,
        store_url,
        checkpointed=checkpointed,
        volume=volume,
        slow_interval=slow_interval,
        data_path=data_path,
    )
    run(dag, "numbers", 1)
    if fail_batch is None:
        wall, pushed = run(dag, "squares", 1)
        return {"variant": name, "wall_s": round(wall, 2), "retry_s": None, "redone_bytes": 0,
                "checkpoint": pushed["squares"].get("checkpoint")}  # fmt: skip
    fault = [{"task": "squares", "mode": "batch", "batch": fail_batch}]
    first, _ = run(dag, "squares", 1, fault)
    read_by_first = read_through_failed_batch(dag.task_dict["squares"].store, checkpoints, dag_id, fail_batch)
    if scratch:  # a stage without checkpoints: nothing to resume from
        store = dag.task_dict["squares"].store
        from airflow_ft_provider.partitions import RunRef

        prefix = store.layout.checkpoints_prefix(RunRef(dag_id, "manual__bench"), "squares")
        store.delete_keys(list(store.list_objects(prefix)))
        dag.task_dict["squares"].__dict__.pop("store", None)
        shutil.rmtree(checkpoints / dag_id, ignore_errors=True)
    retry, pushed = run(dag, "squares", 2, fault)
    summary = pushed["squares"]["checkpoint"]
    total, read_again = summary["input_bytes"], summary["input_bytes_read"]
    redone = read_again - (total - read_by_first)
    return {
        "variant": name,
        "wall_s": round(first + retry, 2),
        "retry_s": round(retry, 2),
        "redone_bytes": redone,
        "input_bytes": total,
        "read_by_failed_try": read_by_first,
        "checkpoint": summary,
    }


def probe_input(store_url: str, data_path: str) -> tuple[int, list[int]]:
    """The bytes of ``numbers`` as ``data_path`` writes it, and its files' sizes."""
    from airflow_ft_provider.partitions import RunRef

    dag_id = f"bench_ckpt_probe_{data_path}"
    probe = build(dag_id, store_url, checkpointed=False, volume=1, data_path=data_path)
    run(probe, "numbers", 1)
    manifest = probe.task_dict["numbers"].store.manifest(RunRef(dag_id, "manual__bench").parse("numbers"))
    return manifest.total_size, [f.size for f in manifest.files]


def micro_batches(row: dict) -> str:
    """The micro-batches the variant's last try ran to its end (its last checkpoint + 1), or blank."""
    checkpoint = row.get("checkpoint") or {}
    last = checkpoint.get("last_checkpoint", (checkpoint.get("checkpoints") or {}).get("last_completed"))
    return "" if last is None else str(last + 1)


def median_of(runs: list[dict]) -> dict:
    """The run with the median wall time (its other figures come with it), and every run's walls."""
    ordered = sorted(runs, key=lambda r: r["wall_s"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["walls_s"] = [r["wall_s"] for r in runs]
    chosen["retries_s"] = [r["retry_s"] for r in runs]
    if chosen["retry_s"] is not None:
        chosen["retry_s"] = statistics.median(r["retry_s"] for r in runs)
    return chosen


def main() -> None:
    global ROWS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--overhead-batches", type=int, default=4)
    parser.add_argument("--fail-at", type=float, default=0.8)
    parser.add_argument("--runs", type=int, default=3, help="rounds of the variants (medians are shown)")
    parser.add_argument("--slow-interval", type=float, default=2.0, help="interval (s) of the slow-sink run")
    args = parser.parse_args()
    ROWS = args.rows
    work = Path(tempfile.mkdtemp(prefix="ft-bench-ckpt-"))
    checkpoints = work / "checkpoints"
    s3 = start_moto_server()
    server = SparkConnectServer(conf={"spark.sql.shuffle.partitions": "2"}).start()
    os.environ.update(
        AIRFLOW_CONN_AWS_DEFAULT=s3.aws_connection(),
        AIRFLOW_CONN_FT_BENCH_CONNECT=json.dumps(server.connection()),
        AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION="True",
        AIRFLOW__FT_PROVIDER__CHECKPOINT_LOCAL_DIR=str(checkpoints),
    )
    try:
        s3.client().create_bucket(Bucket="ft-bench-ckpt")
        url = "s3://ft-bench-ckpt/pipelines/"
        # The input's size sets the micro-batch volume: --batches batches of equal input. Each data path
        # writes ``numbers`` its own way (Spark's Parquet writer, or pyarrow's in the executors), so each
        # gets the volume of its own input: both run --batches micro-batches.
        input_bytes, sizes = probe_input(url, "staged")
        executors_bytes, _ = probe_input(url, "executors")
        volume = int(input_bytes / args.batches * 1.02)  # --batches micro-batches of whole files
        executors_volume = int(executors_bytes / args.batches * 1.02)
        fail_batch = failing_batch(sizes, volume, args.fail_at)
        print(f"input: {ROWS:,} rows, {input_bytes / 2**20:.1f} MiB in {FILES} files "
              f"({executors_bytes / 2**20:.1f} MiB on the executors' path); micro-batches of "
              f"{volume / 2**20:.1f} MiB ({executors_volume / 2**20:.1f}); "
              f"failure inside batch {fail_batch}")  # fmt: skip
        rounds = []
        for round_number in range(args.runs):
            print(f"round {round_number + 1} of {args.runs}")
            one = {"checkpoints": checkpoints, "volume": volume, "round_number": round_number}
            rounds.append(
                [
                    variant("plain", url, checkpointed=False, **one),
                    variant("checkpointed", url, checkpointed=True, **one),
                    variant(f"checkpointed/{args.overhead_batches}", url, checkpointed=True,
                            **{**one, "volume": -(-input_bytes // args.overhead_batches)}),
                    variant("resumed", url, checkpointed=True, fail_batch=fail_batch, **one),
                    variant("from scratch", url, checkpointed=True, fail_batch=fail_batch, scratch=True,
                            **one),
                    # the executors' data path: Spark's own checkpoint, micro-batches written to the store
                    variant("plain/executors", url, checkpointed=False, data_path="executors", **one),
                    variant("checkpointed/executors", url, checkpointed=True, data_path="executors",
                            **{**one, "volume": executors_volume}),
                ]
            )  # fmt: skip
        rows = [median_of([r[i] for r in rounds]) for i in range(len(rounds[0]))]
        rows.append(
            variant(
                "slow sink",
                url,
                checkpoints,
                checkpointed=True,
                volume=volume,
                slow_interval=f"{args.slow_interval} s",
            )
        )
    finally:
        server.stop()
        stop_moto_server(s3)
        shutil.rmtree(work, ignore_errors=True)
    by = {r["variant"]: r for r in rows}
    overhead = by["checkpointed"]["wall_s"] / by["plain"]["wall_s"] - 1
    fewer = by[f"checkpointed/{args.overhead_batches}"]["wall_s"] / by["plain"]["wall_s"] - 1
    on_executors = by["checkpointed/executors"]["wall_s"] / by["plain/executors"]["wall_s"] - 1
    retry_ratio = by["resumed"]["retry_s"] / by["from scratch"]["retry_s"]
    wall_ratio = by["resumed"]["wall_s"] / by["from scratch"]["wall_s"]
    print(f"medians of {args.runs} runs")
    print(f"{'variant':>22} {'wall':>8} {'retry':>8} {'redone':>10} {'batches':>7}  walls")
    for r in rows:
        retry = f"{r['retry_s']:.2f} s" if r["retry_s"] is not None else ""
        walls = " ".join(f"{w:.1f}" for w in r.get("walls_s", [r["wall_s"]]))
        redone = r["redone_bytes"] / 2**20
        batches = micro_batches(r)
        print(f"{r['variant']:>22} {r['wall_s']:>6.2f} s {retry:>8} {redone:>6.1f} MiB {batches:>7}  {walls}")
    print(f"failure-free overhead of checkpointing: {overhead:+.1%} with {args.batches} micro-batches, "
          f"{fewer:+.1%} with {args.overhead_batches} (target ≤ +10 %); on the executors' path "
          f"{on_executors:+.1%} with {args.batches}")  # fmt: skip
    print(f"retry, resumed vs from scratch: {retry_ratio:.2f}× (target ≤ 0.4×); "
          f"failure to success: {wall_ratio:.2f}×")  # fmt: skip
    slow = by["slow sink"]["checkpoint"]["seconds_between_checkpoints"]
    steady = slow[1:] or slow  # the first follows the one-file probe
    fixed = by["slow sink"]["wall_s"] / (input_bytes / volume)
    worst = max(slow)
    print(
        f"slow sink (5x), interval {args.slow_interval:g} s: {len(slow) + 1} checkpoints, time between "
        f"them median {statistics.median(steady):.2f} s, max {worst:.2f} s "
        f"({worst / args.slow_interval:.2f}x the interval, target ≤ 2x); "
        f"a micro-batch of interval-volume would take ~{fixed:.1f} s"
    )
    print(f"work redone: {by['resumed']['redone_bytes'] / volume:.2f} micro-batch(es) vs "
          f"{by['from scratch']['redone_bytes'] / volume:.2f} from scratch (target ≤ 1)")  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "rows_in": ROWS,
                "runs": args.runs,
                "input_bytes": input_bytes,
                "batch_bytes": volume,
                "executors_input_bytes": executors_bytes,
                "executors_batch_bytes": executors_volume,
                "fail_batch": fail_batch,
                "overhead": round(overhead, 4),
                "overhead_fewer_batches": round(fewer, 4),
                "overhead_executors": round(on_executors, 4),
                "retry_ratio": round(retry_ratio, 3),
                "wall_ratio": round(wall_ratio, 3),
                "slow_interval": args.slow_interval,
                "slow_max_between": worst,
                "slow_median_between": statistics.median(steady),
                "variants": rows,
            },
            indent=2,
        )  # fmt: skip
    )


if __name__ == "__main__":
    main()
