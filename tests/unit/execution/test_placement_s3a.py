"""The stage operator's direct-s3a mode: Spark reads inputs from and writes outputs to S3 itself.

This machine cannot run Spark against s3a:// (the hadoop-aws jars cannot be downloaded), so the Spark
application is stood in for by a writer that does what Spark with s3a does: reads the s3a:// input
URIs it is given and writes Parquet part files, _SUCCESS and the stage_io marker under the s3a://
output prefix. Everything else is real: the operator, the pipeline, and S3 (moto server over HTTP).
"""

import io
import json
import types

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.pipeline import FailoverPipeline
from airflow_ft_provider.spark.spec import OUTPUT_MARKER, SPARK_CONF_KEY, StageSpec

pytestmark = pytest.mark.s3


class SparkWithS3a:
    """Reads every input object, doubles 'value', writes each declared output (see module docstring)."""

    def __init__(self, client, **kwargs):
        self.client, self.spec = client, StageSpec.decode(kwargs["conf"][SPARK_CONF_KEY])

    def _split(self, uri):
        assert uri.startswith("s3a://"), uri
        bucket, key = uri.removeprefix("s3a://").split("/", 1)
        return bucket, key

    def submit(self, application):
        rows = []
        for spec in self.spec.inputs.values():
            for partition in spec.partitions:
                for uri in partition.paths:
                    body = self.client.get_object(
                        **dict(zip(("Bucket", "Key"), self._split(uri), strict=True))
                    )["Body"].read()
                    rows += pq.read_table(io.BytesIO(body)).to_pylist()
        rows = [{"key": r["key"], "value": r["value"] * 2} for r in rows] or [
            {"key": k, "value": k} for k in range(5)
        ]
        for output in self.spec.outputs.values():
            bucket, prefix = self._split(output.location)
            buffer = io.BytesIO()
            pq.write_table(pa.Table.from_pylist(rows), buffer)
            for name, data in (
                ("part-00000.parquet", buffer.getvalue()),
                ("_SUCCESS", b""),
                (OUTPUT_MARKER, json.dumps({"rows": len(rows)}).encode()),
            ):
                self.client.put_object(Bucket=bucket, Key=prefix.rstrip("/") + "/" + name, Body=data)

    def on_kill(self):
        pass


class TaskInstance(types.SimpleNamespace):
    def xcom_push(self, key, value):
        self.pushed[key] = value

    def xcom_pull(self, **kwargs):
        return None


def test_direct_s3a_stages_read_and_commit_partitions_on_s3(s3_bucket, monkeypatch):
    #   source --numbers--> doubler
    endpoint = s3_bucket.endpoint
    monkeypatch.setenv(
        "AIRFLOW_CONN_AWS_DEFAULT",
        json.dumps(
            {
                "conn_type": "aws",
                "login": endpoint.access_key,
                "password": endpoint.secret_key,
                "extra": {"endpoint_url": endpoint.url, "region_name": endpoint.region},
            }
        ),
    )
    with DAG("ft_direct_s3a", schedule=None) as dag:
        with FailoverPipeline(
            store=s3_bucket.url, data_path="s3a", restart_strategy={"restart-strategy.type": "none"}
        ):
            SparkStageOperator(
                task_id="source", application="/jobs/source.py", outputs=["numbers"]
            )  # stood in for
            SparkStageOperator(
                task_id="doubler", application="/jobs/double.py", inputs=["numbers"], outputs=["doubled"]
            )
    run_id = "manual__2026-11-22T05:00:00+00:00"
    for task_id in ("source", "doubler"):
        operator = dag.task_dict[task_id]
        operator.spark_hook = lambda **kwargs: SparkWithS3a(s3_bucket.client(), **kwargs)
        ti = TaskInstance(map_index=-1, try_number=1, pushed={})
        operator.execute({"ti": ti, "run_id": run_id, "dag_run": None, "params": {}})
        assert list(ti.pushed["ft_partitions"]) == [operator.outputs[0].result]

    store = dag.task_dict["doubler"].store
    assert sorted(
        r["value"] for r in read_table(store, RunRef("ft_direct_s3a", run_id).parse("doubled")).to_pylist()
    ) == [0, 2, 4, 6, 8]
    manifest = store.manifest(RunRef("ft_direct_s3a", run_id).parse("doubled"))
    assert [f.name for f in manifest.files] == ["part-00000.parquet"]  # markers are not data
    assert manifest.row_count == 5 and manifest.producer.task_id == "doubler"
