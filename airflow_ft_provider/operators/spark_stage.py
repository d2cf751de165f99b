"""SparkStageOperator: one Spark batch stage of a FailoverPipeline, as an Airflow task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_ft_provider.exchanges import normalize_inputs, normalize_outputs


class SparkStageOperator(BaseOperator):
    """Run a PySpark application that reads and writes result partitions.

    Before submitting, every input partition this task reads is resolved through its manifest and
    verified; a missing or corrupt one raises ``PartitionNotFound`` (which drives backtracking).
    The application is submitted with the Spark provider's ``SparkSubmitHook`` (master from the
    ``spark`` connection). Only after it succeeds are its outputs committed to the partition store;
    a failed application commits nothing.

    :param application: the PySpark file to run (templated); it uses ``airflow_ft_provider.spark.stage_io``.
    :param inputs: results read, e.g. ``["raw"]`` or ``{"raw": "pointwise"}`` (default all-to-all).
    :param outputs: results written, e.g. ``["cleaned"]`` or ``{"enriched": "pipelined"}`` (default blocking).
    :param application_args: arguments for the application (templated).
    :param conf: extra Spark configuration (templated).
    :param spark_conn_id: ``spark`` connection; default: the pipeline's (``spark_default``).
    :param spark_submit_kwargs: further ``SparkSubmitHook`` arguments (executor_memory, jars, ...).
    """

    is_pipeline_stage = True
    template_fields: Sequence[str] = ("application", "application_args", "conf", "env_vars", "spark_name")
    ui_color = "#fbe3c2"

    def __init__(
        self,
        *,
        application: str,
        inputs: object = None,
        outputs: object = None,
        application_args: list[Any] | None = None,
        conf: dict[str, Any] | None = None,
        env_vars: dict[str, str] | None = None,
        spark_name: str | None = None,
        spark_conn_id: str | None = None,
        spark_submit_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.application = application
        self.inputs = normalize_inputs(inputs)
        self.outputs = normalize_outputs(outputs)
        self.application_args = application_args or []
        self.conf = conf or {}
        self.env_vars = env_vars or {}
        self.spark_name = spark_name
        self.spark_conn_id = spark_conn_id
        self.spark_submit_kwargs = spark_submit_kwargs or {}
        self._hook = None
