"""The planner's measure: the committed size of its stage's inputs, from their manifests (S3 endpoint)."""

from __future__ import annotations

import pytest

from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output
from airflow_ft_provider.operators.auto_parallelism import committed_input_bytes
from airflow_ft_provider.partitions import PartitionNotFound, Producer, RunRef
from ft_harness.data.partition_files import RUN_ID, write_files

pytestmark = pytest.mark.s3

# A mapped 12 times, B reads every index of a and all of c (one partition)
PIPELINE = PipelineDescription(
    "ft_sizes",
    [
        StageDeclaration("A", 12, (), (Output("a"),), mapped=True),
        StageDeclaration("C", 1, (), (Output("c"),)),
        StageDeclaration("B", 1, (Input("a"), Input("c")), ()),
    ],
)


def commit(store, run, partition_id, size, tmp_path):
    ref = run.parse(partition_id)
    source = write_files(tmp_path / ref.partition_id, {"part-0.bin": b"x" * size})
    store.commit(ref, source, producer=Producer(ref.result, ref.map_index, 1), format="binary", row_count=1)


def test_every_partition_of_every_input_counts_once(store, tmp_path):
    run = RunRef("ft_sizes", RUN_ID)
    for i in range(12):
        commit(store, run, f"a[{i}]", 1000 + i, tmp_path)
    commit(store, run, "c", 5000, tmp_path)
    assert committed_input_bytes(store, PIPELINE, run, "B") == sum(1000 + i for i in range(12)) + 5000


def test_an_input_not_committed_fails_the_measure_naming_it(store, tmp_path):
    run = RunRef("ft_sizes", RUN_ID)
    for i in (0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11):
        commit(store, run, f"a[{i}]", 1000, tmp_path)
    commit(store, run, "c", 5000, tmp_path)
    with pytest.raises(PartitionNotFound, match=r"a\[3\]"):
        committed_input_bytes(store, PIPELINE, run, "B")
