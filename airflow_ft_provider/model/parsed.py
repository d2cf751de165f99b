"""The pipeline a parsed DAG carries: how a worker's try, retry policy and callbacks find theirs.

A worker (and the DAG processor) parses the DAG file before it runs a task or a callback;
``FailoverPipeline`` attaches itself to the DAG object it builds, so whatever holds the DAG (a task's
context, an operator's ``dag``) holds the pipeline. No process-wide registry: two DAGs of the same id
parsed in one process (tests, a DAG file edited and parsed again) never see each other's.
Components that never parse DAG files (the UI plugin, ``airflow-ft``) read the run's stored
description instead (``recovery.run_recovery.RunRecovery.for_reader``).
"""

from __future__ import annotations

from typing import Protocol

from airflow_ft_provider.failover.classification import FailureLabels

from .description import PipelineDescription, PipelineWiringError

PIPELINE_ATTRIBUTE = "ft_failover_pipeline"


class ParsedPipeline(Protocol):
    """What the DAG carries: its pipeline, with the description built when its block closed."""

    description: PipelineDescription | None

    def failure_labels(self, task_id: str, failure: BaseException) -> FailureLabels:
        """A stage's failure classified with the stage's rules (``recovery/failure_facts.py``)."""
        ...


def attach(dag: object, pipeline: ParsedPipeline) -> None:
    setattr(dag, PIPELINE_ATTRIBUTE, pipeline)


def attached(dag: object) -> ParsedPipeline | None:
    """The pipeline ``dag`` carries, or None."""
    pipeline: ParsedPipeline | None = getattr(dag, PIPELINE_ATTRIBUTE, None)
    return pipeline


def parsed_description(dag: object) -> PipelineDescription:
    """The description of the pipeline in ``dag``, as this process parsed it."""
    pipeline = attached(dag)
    if pipeline is None or pipeline.description is None:
        dag_id = getattr(dag, "dag_id", dag)
        raise PipelineWiringError(
            f"DAG {dag_id!r} has no FailoverPipeline; create stage operators inside "
            "'with FailoverPipeline(...):' in the DAG file"
        )
    return pipeline.description
