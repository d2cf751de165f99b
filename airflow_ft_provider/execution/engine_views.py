"""A consumer's check of a pipelined partition its Spark Connect server keeps as a view.

A view is not a file with a checksum: what can be checked is that it is there, on the server the stage
runs on, and that it still has the rows it was published with (its handle records them). A view
replaced under the same name, or recomputed from inputs that changed after its cache was lost, fails
the count, and backtracking re-runs its producer region instead of feeding wrong data onwards.
"""

from __future__ import annotations

from airflow_ft_provider.execution.contracts import StageBackend
from airflow_ft_provider.partitions import PartitionNotFound, PartitionRef, Unavailable
from airflow_ft_provider.partitions.pipelined_handle import PipelinedHandle


def check_engine_view(
    ref: PartitionRef, handle: PipelinedHandle, backend: StageBackend, *, consumer: str
) -> None:
    """Raise unless ``backend`` holds ``handle``'s view with the rows it was published with:
    PartitionNotFound for a lost or changed view, RuntimeError for a stage on another server."""
    engine = handle.engine
    assert engine is not None
    if not backend.keeps_pipelined or backend.server != engine.server:
        here = backend.server or backend.name
        raise RuntimeError(
            f"pipelined partition {ref.partition_id!r} is kept by the Spark Connect server "
            f"{engine.server}, but {consumer} runs on {here}: the stages of a failover region share "
            "their pipelined data, so give them the same Spark connection (spark_conn_id)"
        )
    rows = backend.held_rows(engine.view)
    if rows is None:
        raise PartitionNotFound(
            ref.partition_id,
            Unavailable.PIPELINED,
            f"the Spark Connect server {engine.server} no longer holds view {engine.view} of execution "
            f"{handle.execution} (server restarted, or the data was released)",
            run=str(ref.run),
        )
    if handle.rows is not None and rows != handle.rows:
        raise PartitionNotFound(
            ref.partition_id,
            Unavailable.CHECKSUM_MISMATCH,
            f"view {engine.view} of execution {handle.execution} has {rows} rows, {handle.rows} when it "
            "was published (its data changed: replaced, or recomputed from changed inputs)",
            run=str(ref.run),
        )
