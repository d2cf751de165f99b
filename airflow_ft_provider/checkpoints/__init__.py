"""Checkpointed stages: Flink's checkpoint half on Spark Structured Streaming (seeds 001, 003, 004).

A checkpointed stage reads its committed inputs incrementally (``availableNow`` micro-batches), and a
completed micro-batch is a checkpoint: Spark's offsets and commits logs (and state store), plus the
output of the batches it covers. A retry resumes from the last one -- only if its inputs are the same
committed attempts it was taken against -- and the stage's output partition is committed once, after
the last micro-batch, by the ordinary commit protocol.

``config`` (Flink's checkpoint keys, validated when the DAG is parsed) and ``fencing`` (resume or start
fresh, and why) are pure; nothing here imports Airflow.
"""
