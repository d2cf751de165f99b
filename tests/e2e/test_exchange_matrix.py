"""Every exchange shape, live: blocking and pipelined x 1 or 2 producers x 1 or 2 consumers x pointwise
and all-to-all, each failure-free and with its first consumer task failing once (real Airflow, real
Spark on the Connect server, real S3 endpoint). Pipelined partitions stay in the Spark server.

    P[0..p-1] --x--> C[0..c-1] --out-->          (tests/e2e/dags/ft_e2e_exchange_matrix.py)

Blocking: only the failed consumer task runs again; its producers' partitions are re-read.
Pipelined: the failed task's whole region runs again -- [P[0], C[0]] for 2->2 pointwise, the whole
component otherwise (one producer partition feeds every consumer, or every consumer reads every
partition) -- and the consumers read the new execution.
"""

from __future__ import annotations

import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.partitions.pipelined import PipelinedPartitions
from ft_harness.airflow.airflow_rest import try_numbers
from ft_harness.chaos.scenario_runs import SCENARIOS
from tests.e2e.dags.ft_e2e_exchange_matrix import SHAPES

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

DAG_ID = "ft_e2e_exchange_matrix"


def tasks(stage: str, parallelism: int) -> list[str]:
    return [stage] if parallelism == 1 else [f"{stage}[{i}]" for i in range(parallelism)]


def restarted(shape: str) -> set[str]:
    """The tasks that run twice when the first consumer task of ``shape`` fails once."""
    kind, producers, consumers, pattern = SHAPES[shape]
    first_consumer = tasks(f"C_{shape}", consumers)[0]
    if kind == "blocking":
        return {first_consumer}
    if (producers, consumers, pattern) == (2, 2, "pointwise"):
        return {f"P_{shape}[0]", f"C_{shape}[0]"}
    return {*tasks(f"P_{shape}", producers), *tasks(f"C_{shape}", consumers)}


def expected_rows(shape: str, consumer: int) -> list[tuple[int, int]]:
    """What consumer task ``consumer`` outputs: the keys of the partitions it reads, value key*10 + 1."""
    _, producers, consumers, pattern = SHAPES[shape]
    reads = [consumer] if (pattern, producers, consumers) == ("pointwise", 2, 2) else range(producers)
    return sorted((key, key * 10 + 1) for partition in reads for key in range(partition, 40, producers))


@pytest.fixture(scope="module")
def matrix(live_airflow, scenario_runs, s3_endpoint, e2e_store_url):
    runs = scenario_runs.start(SCENARIOS)  # all scenarios at once: the scheduler works on them together
    api = live_airflow.client
    finished = {}
    for name in ("matrix_clean", "matrix_faults"):
        dag_id, run_id = runs[name]
        final = api.wait_for_dag_run(dag_id, run_id, timeout=1500)
        finished[name] = (
            run_id,
            final["state"],
            try_numbers(api.task_instances(dag_id, run_id)),
            live_airflow.describe_run(dag_id, run_id),
        )
    return finished, S3PartitionStore(s3_endpoint.client(), e2e_store_url)


def outputs(store, run_id, shape):
    _, _, consumers, _ = SHAPES[shape]
    run = RunRef(DAG_ID, run_id)
    return [
        sorted((r["key"], r["value"]) for r in read_table(store, run.parse(pid)).to_pylist())
        for pid in tasks(f"out_{shape}", consumers)
    ]


@pytest.mark.parametrize("shape", SHAPES)
def test_each_exchange_shape_runs_and_recovers_restarting_only_what_the_rules_name(matrix, shape):
    (clean_id, clean_state, clean_tries, clean_story), (faults_id, state, tries, story) = (
        matrix[0]["matrix_clean"],
        matrix[0]["matrix_faults"],
    )
    store = matrix[1]
    kind, producers, consumers, _ = SHAPES[shape]
    mine = [*tasks(f"P_{shape}", producers), *tasks(f"C_{shape}", consumers)]
    assert clean_state == "success", clean_story
    assert {t: clean_tries[t] for t in mine} == dict.fromkeys(mine, 1), clean_story
    assert state == "success", story
    again = restarted(shape)
    assert {t: tries[t] for t in mine} == {t: 2 if t in again else 1 for t in mine}, story
    wanted = [expected_rows(shape, c) for c in range(consumers)]
    assert outputs(store, clean_id, shape) == wanted
    assert outputs(store, faults_id, shape) == wanted  # equal to the failure-free run
    if kind == "pipelined":
        # Each consumer read the execution of its region that is current: the restarted producer
        # tasks' second, the others' first; a view once every consumer of it has read it is released.
        pipelined = PipelinedPartitions(store)
        run = RunRef(DAG_ID, faults_id)
        for producer, pid in zip(tasks(f"P_{shape}", producers), tasks(f"x_{shape}", producers), strict=True):
            handle = pipelined.resolve(run.parse(pid))
            assert handle.execution == ("t2" if producer in again else "t1"), (pid, handle)
            assert handle.engine is not None, handle
