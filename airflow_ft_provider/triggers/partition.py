"""PartitionTrigger: waits in the triggerer until blocking result partitions are committed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_ft_provider.partitions.errors import PartitionStoreError

if TYPE_CHECKING:
    from airflow_ft_provider.partitions import S3PartitionStore, UnavailablePartition


def describe_unavailable(unavailable: Mapping[str, UnavailablePartition]) -> dict[str, str]:
    """``{partition id: "reason (detail)"}`` of an AvailabilityReport's ``unavailable`` mapping."""
    return {
        pid: f"{problem.reason}" + (f" ({problem.detail})" if problem.detail else "")
        for pid, problem in sorted(unavailable.items())
    }


class PartitionTrigger(BaseTrigger):
    """Poll the partition store until every partition in ``partitions`` of a run can be consumed.

    Each poll is one ``S3PartitionStore.check_availability`` (a listing of the run's prefix plus one
    GET per manifest), run in a worker thread so the triggerer's event loop never blocks on boto3.
    ``run()`` never raises; it yields exactly one event:

    - ``{"status": "success", "partitions": [...]}`` when all are available;
    - ``{"status": "timeout", "missing": {partition id: reason}}`` when ``timeout_at`` passes first;
    - ``{"status": "error", "message": ...}`` when S3 or the connection fails (no credentials in it).

    :param pipeline: DAG id of the producing pipeline.
    :param run_id: the producing DAG run.
    :param partitions: partition ids, ``result`` or ``result[i]``.
    :param store_url: ``s3://bucket/prefix/``; None: ``[ft_provider] partition_store_url``.
    :param aws_conn_id: the ``aws`` connection of the store.
    :param region_name: overrides the connection's region (as the sensor's ``region_name``).
    :param poke_interval: seconds between polls.
    :param timeout_at: give up at this time (seconds since the epoch, UTC); absolute, so that a
        trigger re-created after a triggerer restart keeps the original deadline. None: wait forever.
    :param deep_check: also read every object back and verify its checksum.
    """

    def __init__(
        self,
        *,
        pipeline: str,
        run_id: str,
        partitions: list[str],
        store_url: str | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        poke_interval: float = 60.0,
        timeout_at: float | None = None,
        deep_check: bool = False,
    ) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.run_id = run_id
        self.partitions = list(partitions)
        self.store_url = store_url
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.poke_interval = poke_interval
        self.timeout_at = timeout_at
        self.deep_check = deep_check

    def serialize(self) -> tuple[str, dict[str, object]]:
        return (
            "airflow_ft_provider.triggers.partition.PartitionTrigger",
            {
                "pipeline": self.pipeline,
                "run_id": self.run_id,
                "partitions": list(self.partitions),
                "store_url": self.store_url,
                "aws_conn_id": self.aws_conn_id,
                "region_name": self.region_name,
                "poke_interval": self.poke_interval,
                "timeout_at": self.timeout_at,
                "deep_check": self.deep_check,
            },
        )

    def _store(self) -> S3PartitionStore:
        # Blocking: reads the connection (through the SDK's comms from this worker thread) and config.
        from airflow_ft_provider.hooks.partition_store import PartitionStoreHook

        hook = PartitionStoreHook(self.aws_conn_id, url=self.store_url, region_name=self.region_name)
        return hook.get_store()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        run = f"{self.pipeline}/{self.run_id}"
        try:
            store = await asyncio.to_thread(self._store)
            while True:
                report = await asyncio.to_thread(
                    store.check_availability,
                    self.pipeline,
                    self.run_id,
                    self.partitions,
                    deep=self.deep_check,
                )
                if not report.unavailable:
                    self.log.info("partitions %s of run %s are available", self.partitions, run)
                    yield TriggerEvent({"status": "success", "partitions": list(self.partitions)})
                    return
                missing = describe_unavailable(report.unavailable)
                remaining = None if self.timeout_at is None else self.timeout_at - time.time()
                if remaining is not None and remaining <= 0:
                    self.log.info("timed out waiting for partitions of run %s: %s", run, missing)
                    yield TriggerEvent({"status": "timeout", "missing": missing})
                    return
                self.log.info(
                    "waiting for %d of %d partitions of run %s: %s",
                    len(missing),
                    len(self.partitions),
                    run,
                    missing,
                )
                delay = self.poke_interval if remaining is None else min(self.poke_interval, remaining)
                await asyncio.sleep(delay)
        except Exception as exc:  # run() reports, the sensor raises (asyncio.CancelledError passes)
            message = _error_message(exc, run, self.store_url)
            self.log.error("%s", message)
            yield TriggerEvent({"status": "error", "message": message})


def _error_message(exc: Exception, run: str, store_url: str | None) -> str:
    """What went wrong, for the task log and the trigger event; never credentials."""
    from airflow.sdk.log import redact

    where = f"partition store {store_url}" if store_url else "the partition store"
    if isinstance(exc, (PartitionStoreError, ValueError)):
        detail = str(exc)  # both name bucket, key, S3 code or the bad setting, never a secret
    else:
        detail = f"{type(exc).__name__}: {exc}"
    # Connection passwords and extras are registered with the secrets masker when they are read.
    return str(redact(f"cannot check partitions of run {run} in {where}: {detail}"))
