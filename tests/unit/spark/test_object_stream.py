"""Which objects make a checkpointed stage's output on the executors' data path (spark/object_stream.py):
each micro-batch's run that Spark committed (the newest try's), one task attempt per partition."""

from __future__ import annotations

from airflow_ft_provider.spark.object_stream import chosen_markers, marker_name, task_markers, try_folder


def marker(batch: int, try_number: int, partition: int, attempt: int = 0) -> str:
    return try_folder(batch, try_number) + marker_name(partition, attempt)


def chosen(keys: list[str], wanted: list[int]) -> list[tuple[int, int, int, int]]:
    return [
        (m.batch_id, m.try_number, m.partition, m.attempt) for m in chosen_markers(task_markers(keys), wanted)
    ]


def test_a_micro_batch_run_again_by_a_later_try_is_taken_from_that_try_alone():
    #   try 1 ran micro-batch 3 in part (partitions 0 and 2) and failed; try 2 ran it whole
    keys = [marker(3, 1, 0), marker(3, 1, 2), marker(3, 2, 0), marker(3, 2, 1), marker(3, 2, 2)]
    assert chosen(keys, [3]) == [(3, 2, 0, 0), (3, 2, 1, 0), (3, 2, 2, 0)]


def test_a_partition_written_by_two_task_attempts_counts_once():
    #   a task retried after a lost executor, and a speculative duplicate: both finished their object
    keys = [marker(0, 1, 0, attempt=1), marker(0, 1, 0, attempt=0), marker(0, 1, 1, attempt=2)]
    assert chosen(keys, [0]) == [(0, 1, 0, 0), (0, 1, 1, 2)]


def test_only_the_wanted_micro_batches_and_a_partition_without_rows_leaves_no_marker():
    keys = [marker(0, 1, 0), marker(1, 1, 0), marker(2, 1, 1), marker(9, 1, 0)]  # 9: past the input
    assert chosen(keys, [0, 1, 2]) == [(0, 1, 0, 0), (1, 1, 0, 0), (2, 1, 1, 0)]
    assert chosen(keys, [2]) == [(2, 1, 1, 0)]  # complete mode: the last micro-batch alone
    assert chosen(keys, [5]) == []  # a micro-batch none of whose partitions had rows


def test_keys_that_are_not_markers_are_not_read_as_ones():
    keys = [
        "b000001/t001/part-00000-a0-0123456789ab.parquet",
        "b000001/t001/_task-p0-a0.json",
        "b000001/_task-p00000-a0.json",
        "../b000001/t001/_task-p00000-a0.json",
        "b000001/t001/_task-p00000-a0.json.tmp",
        marker(1, 12, 3, 4),
    ]
    assert [(m.batch_id, m.try_number, m.partition, m.attempt) for m in task_markers(keys)] == [(1, 12, 3, 4)]
