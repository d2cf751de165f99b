"""PartitionSensor: wait until blocking result partitions of a pipeline run are committed."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.sensors.base_aws import AwsBaseSensor
from airflow.providers.amazon.aws.utils.mixins import aws_template_fields
from airflow.sdk import PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from airflow_ft_provider.hooks.partition_store import PartitionStoreHook
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.triggers.partition import PartitionTrigger, describe_unavailable

if TYPE_CHECKING:
    from airflow.sdk import Context

# The trigger's own deadline yields a "timeout" event naming the missing partitions; the deferral
# timeout the scheduler enforces is only a backstop (triggerer down), so it fires a little later.
TRIGGER_TIMEOUT_GRACE = 60.0


class PartitionSensor(AwsBaseSensor[PartitionStoreHook]):
    """Wait for committed (blocking) result partitions, of this DAG run or of another pipeline's run.

    An ``AwsBaseSensor`` (like the Amazon provider's ``S3KeySensor``): ``aws_conn_id``, ``region_name``,
    ``verify`` and ``botocore_config`` reach the store's ``PartitionStoreHook`` (every auth mode of an
    ``aws`` connection).

    A partition is available when its manifest is committed and every object it lists is present
    with the listed size (``deep_check``: and checksum). Returns (and pushes as XCom) the list of
    partition ids.

    :param partitions: partition ids, ``result`` for an unmapped producer or ``result[i]`` for map
        index i (templated); a single id may be given as a string.
    :param pipeline: DAG id of the producing pipeline (templated); default: this DAG.
    :param run_id: the producing DAG run (templated); default: this DAG run.
    :param store_url: ``s3://bucket/prefix/`` of the partition store (templated); default
        ``[ft_provider] partition_store_url``.
    :param aws_conn_id: ``aws`` connection of the store (and ``region_name``, ``verify``,
        ``botocore_config``, as for every ``AwsBaseSensor``).
    :param deep_check: also read every object back and verify its checksum (reads all the data).
    :param deferrable: wait in the triggerer (``PartitionTrigger``) instead of a worker slot;
        default ``[operators] default_deferrable``.
    :param poke_interval: seconds between checks (also in the triggerer).
    :param timeout: seconds before the sensor fails with ``AirflowSensorTimeout``.
    :param mode: ``poke`` or ``reschedule`` when not deferrable.
    """

    aws_hook_class = PartitionStoreHook
    template_fields: Sequence[str] = aws_template_fields("partitions", "pipeline", "run_id", "store_url")
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        partitions: str | Sequence[str],
        pipeline: str | None = None,
        run_id: str | None = None,
        store_url: str | None = None,
        deep_check: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not partitions:
            raise ValueError(
                f"{self.task_id}: partitions must name at least one partition ('result' or 'result[i]')"
            )
        self.partitions = partitions
        self.pipeline = pipeline
        self.run_id = run_id
        self.store_url = store_url
        self.deep_check = deep_check
        self.deferrable = deferrable

    @property
    def _hook_parameters(self) -> dict[str, object]:
        return {**super()._hook_parameters, "url": self.store_url}

    def _target(self, context: Context) -> tuple[str, str, list[str]]:
        """(pipeline, run id, partition ids) after rendering; ids checked with the store's rules."""
        pipeline = self.pipeline or self.dag_id
        run_id = self.run_id or context["run_id"]
        partitions = [self.partitions] if isinstance(self.partitions, str) else list(self.partitions)
        run = RunRef(pipeline, run_id)
        return pipeline, run_id, [run.parse(p).partition_id for p in partitions]

    def poke(self, context: Context) -> PokeReturnValue:
        pipeline, run_id, partitions = self._target(context)
        report = self.hook.get_store().check_availability(pipeline, run_id, partitions, deep=self.deep_check)
        if report.unavailable:
            missing = describe_unavailable(report.unavailable)
            self.log.info(
                "waiting for %d of %d partitions of run %s/%s:",
                len(missing),
                len(partitions),
                pipeline,
                run_id,
            )
            for pid, why in missing.items():
                self.log.info("  %s: %s", pid, why)
            return PokeReturnValue(False)
        self.log.info("partitions %s of run %s/%s are available", partitions, pipeline, run_id)
        return PokeReturnValue(True, xcom_value=partitions)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first:
            return first.xcom_value
        pipeline, run_id, partitions = self._target(context)
        self.defer(
            trigger=PartitionTrigger(
                pipeline=pipeline,
                run_id=run_id,
                partitions=partitions,
                store_url=self.store_url,
                aws_conn_id=self.aws_conn_id,
                region_name=self.region_name,
                poke_interval=self.poke_interval,
                timeout_at=time.time() + self.timeout,
                deep_check=self.deep_check,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout + self.poke_interval + TRIGGER_TIMEOUT_GRACE),
        )

    def execute_complete(self, context: Context, event: dict[str, object] | None = None) -> list[str]:
        """Turn the trigger's event into the task's outcome."""
        pipeline, run_id, _ = self._target(context)
        event = event or {}
        status = event.get("status")
        partitions, missing = event.get("partitions"), event.get("missing") or {}
        if status == "success" and isinstance(partitions, list):
            self.log.info("partitions %s of run %s/%s are available", partitions, pipeline, run_id)
            return [str(p) for p in partitions]
        if status == "timeout" and isinstance(missing, Mapping):
            detail = "; ".join(f"{pid}: {why}" for pid, why in missing.items())
            raise AirflowSensorTimeout(
                f"partitions of run {pipeline}/{run_id} still unavailable after {self.timeout:g} s: {detail}"
            )
        if status == "error":
            raise AirflowException(event.get("message") or "the partition trigger failed without a message")
        raise AirflowException(f"unexpected event from PartitionTrigger: {event!r}")
