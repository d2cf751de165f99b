"""The OpenLineage facets of this provider (``lineage.py``): imported only when Airflow's
``openlineage`` provider asks a stage for its lineage, so that the client is needed only there."""

from __future__ import annotations

import attr
from openlineage.client.facet_v2 import DatasetFacet, RunFacet

SCHEMA_DOC = "https://pypi.org/project/airflow-ft-provider/#openlineage-facets"


@attr.define
class FtTryRunFacet(RunFacet):
    """``ftTry``: why this try of a stage runs, how it came by its outputs, and which try it replaces."""

    tryNumber: int  # noqa: N815 - OpenLineage's field names are camelCase
    cause: str  # first_try, region_restart, backtracking, consumer_restart, manual_restart, retry
    reason: str
    outcome: str  # computed, reused, adopted, resumed_checkpoint, failed
    replacesRunId: str | None = attr.field(default=None)  # noqa: N815
    failedTask: str | None = attr.field(default=None)  # noqa: N815
    lostPartitions: list[str] | None = attr.field(default=None)  # noqa: N815
    restartedBy: str | None = attr.field(default=None)  # noqa: N815
    fromTry: int | None = attr.field(default=None)  # noqa: N815
    fromRun: str | None = attr.field(default=None)  # noqa: N815
    restoredCheckpoint: int | None = attr.field(default=None)  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return f"{SCHEMA_DOC}-ftTry"


@attr.define
class FtPartitionDatasetFacet(DatasetFacet):
    """``ftPartition``: the result partition a dataset is, and the committed attempt that was read or
    written (a partition's name stays, its attempts change with every recomputation)."""

    partitionId: str  # noqa: N815
    type: str  # blocking or pipelined
    attempt: str | None = attr.field(default=None)
    producerTry: int | None = attr.field(default=None)  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return f"{SCHEMA_DOC}-ftPartition"
