"""Example: a checkpointed stage resumes from its last completed micro-batch instead of from 0 %.

    make_readings --readings (blocking, 6 files)--> scale_readings --scaled--> hourly_totals
                                                      (checkpointed)

scale_readings reads its input incrementally (``io.read_stream``: at most 1 kb, about one file, per
micro-batch) and writes each micro-batch's output (``io.write_stream``); Spark's checkpoint records
every completed micro-batch. When it fails inside micro-batch 2, its retry resumes at checkpoint 1 --
the task log says "scale_readings try 2 resumed at checkpoint 1: 33 % of the input is not read
again" -- and its output is committed once, equal to a failure-free run's. hourly_totals reads it
like any blocking partition.

Try: ``{"ft_faults": [{"task": "scale_readings", "mode": "batch", "batch": 2}]}``.
"""

from airflow.sdk import DAG
from example_support import COMMON, SPARK, fault_params

from airflow_ft_provider.decorators import ft_stage
from airflow_ft_provider.pipeline import FailoverPipeline


@ft_stage(outputs=["readings"], **SPARK)
def make_readings(spark, io):
    """6000 readings in 6 files: reading id, hour (0-23), value (0-99)."""
    readings = spark.range(0, 6000, numPartitions=6).selectExpr(
        "id AS reading", "id % 24 AS hour", "(id * 7) % 100 AS value"
    )
    io.write("readings", readings)


@ft_stage(
    inputs=["readings"],
    outputs=["scaled"],
    checkpointing={"execution.checkpointing.interval-volume": "1 kb"},
    **SPARK,
)
def scale_readings(spark, io):
    """A long row-by-row stage: checkpointed, so a failure late in it does not start it over."""
    io.write_stream("scaled", io.read_stream("readings").selectExpr("reading", "hour", "value * 10 AS value"))


@ft_stage(inputs=["scaled"], outputs=["hourly_totals"], **SPARK)
def hourly_totals(spark, io):
    io.write(
        "hourly_totals",
        io.read("scaled").groupBy("hour").sum("value").withColumnRenamed("sum(value)", "total"),
    )


with DAG(
    "ft_example_checkpointed_stage",
    description="A checkpointed stage resumes from its last completed micro-batch",
    params=fault_params('[{"task": "scale_readings", "mode": "batch", "batch": 2}]'),
    doc_md=__doc__,
    **COMMON,
):
    with FailoverPipeline(
        restart_strategy={
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "2 s",
        }
    ):
        make_readings()
        scale_readings()
        hourly_totals()
