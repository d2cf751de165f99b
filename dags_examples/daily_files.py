"""Example: stages mapped over what an upstream task returned, their count known only at run time.

    list_files ──▶ [ parse_file[i] ~~parsed[i]~~> score_file[i] ] ──scores[i]──▶ daily_report
     (a task)        pipelined, pointwise: one region per file            blocking, all-to-all

``list_files`` returns the day's files (here: ``files`` names, from the run's conf, 6 by default).
``parse_file`` and ``score_file`` expand over that list, so each run has one map index per file and
one failover region per file: when ``score_file[3]`` fails, only ``parse_file[3]`` and
``score_file[3]`` run again. The counts are recorded with the run the first time a try of each stage
starts (``airflow-ft history`` shows them), so every restart decision, the failover page and
``airflow-ft`` work on the run's expanded graph. An empty list skips both stages and the report, as
Airflow skips an empty map, and the run succeeds.

Try: ``{"files": 12, "ft_faults": [{"task": "score_file[3]", "times": 1}]}``.
"""

from airflow.sdk import DAG, get_current_context, task
from example_support import COMMON, SPARK, fault_params

from airflow_ft_provider.decorators import ft_stage
from airflow_ft_provider.pipeline import FailoverPipeline

LINES_PER_FILE = 10


@task
def list_files() -> list[str]:
    """The day's files; a real pipeline would list a landing prefix. ``files`` in the conf: how many."""
    count = int(get_current_context()["dag_run"].conf.get("files", 6))
    return [f"orders-{n:04d}.csv" for n in range(count)]


@ft_stage(outputs={"parsed": "pipelined"}, **SPARK)
def parse_file(spark, io, name):
    """One file's lines (generated here): file name, line number and an amount."""
    from pyspark.sql import functions as F

    number = int(name.split("-")[1].split(".")[0])
    lines = spark.range(LINES_PER_FILE).select(
        F.lit(name).alias("file"), F.col("id").alias("line"), (F.col("id") + number * 100).alias("amount")
    )
    io.write("parsed", lines)


@ft_stage(inputs={"parsed": "pointwise"}, outputs=["scores"], **SPARK)
def score_file(spark, io, name):
    """Score each line of the file parse_file[i] parsed (the same i: the same file)."""
    from pyspark.sql import functions as F

    io.write("scores", io.read("parsed").withColumn("score", F.col("amount") * 2))


@ft_stage(inputs=["scores"], outputs=["report"], **SPARK)
def daily_report(spark, io):
    from pyspark.sql import functions as F

    report = io.read("scores").groupBy("file").agg(F.count("*").alias("lines"), F.sum("score").alias("score"))
    io.write("report", report)


with DAG(
    "ft_example_daily_files",
    description="Stages mapped over an upstream task's list: one failover region per file",
    params=fault_params('[{"task": "score_file[3]", "times": 1}]'),
    doc_md=__doc__,
    **COMMON,
):
    with FailoverPipeline(
        restart_strategy={
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "3 s",
        }
    ):
        files = list_files()
        parse_file.expand(name=files)
        score_file.expand(name=files)
        daily_report()
