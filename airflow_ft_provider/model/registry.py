"""The pipelines this process has parsed, by DAG id: how a try finds the pipeline of its own DAG.

A worker (and the DAG processor) parses the DAG file before it runs a task or a callback, and
``FailoverPipeline`` registers its description here. Components that never parse DAG files (the UI
plugin in the API server, ``airflow-ft``) read the run's stored description instead
(``recovery.locator``).
"""

from __future__ import annotations

from .description import PipelineDescription, PipelineWiringError

_DESCRIPTIONS: dict[str, PipelineDescription] = {}


def register(description: PipelineDescription) -> None:
    _DESCRIPTIONS[description.dag_id] = description


def parsed_pipeline(dag_id: str) -> PipelineDescription:
    """The description of DAG ``dag_id`` as this process parsed it."""
    try:
        return _DESCRIPTIONS[dag_id]
    except KeyError:
        raise PipelineWiringError(
            f"DAG {dag_id!r} has no FailoverPipeline; create stage operators inside "
            "'with FailoverPipeline(...):' in the DAG file"
        ) from None
