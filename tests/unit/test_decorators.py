"""``@ft_stage`` builds the same SparkStageOperator tasks a DAG author would write by hand.

make[0..2] ~~raw (pipelined, pointwise)~~> tidy[0..2] --tidied--> report
"""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG, task

from airflow_ft_provider.decorators import ft_stage
from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline, pipeline_of

STORE = "s3://ft-decorator/pipelines/"


@ft_stage(outputs={"raw": "pipelined"})
def make(spark, io, shard, shards, label="x"):
    pass


@ft_stage(inputs={"raw": "pointwise"}, outputs=["tidied"])
def tidy(spark, io, shard):
    pass


@ft_stage(inputs=["tidied"])
def report(spark, io):
    pass


def test_calls_and_partial_expand_make_the_pipeline_a_hand_written_one_would():
    with DAG("ft_decorated", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        with FailoverPipeline(store=STORE):
            make.partial(shards=3).expand(shard=[0, 1, 2])
            tidy.expand(shard=[0, 1, 2])
            final = report.override(task_id="final_report", spark_conn_id="spark_connect_eu")()
    assert sorted(sorted(r) for r in pipeline_of(dag).regions) == [
        ["final_report"],
        ["make[0]", "tidy[0]"],
        ["make[1]", "tidy[1]"],
        ["make[2]", "tidy[2]"],
    ]
    mapped = dag.task_dict["make"]
    assert mapped.partial_kwargs["python_callable"] is make.function
    assert mapped.expand_input.value["application_args"] == [[0, 3, "x"], [1, 3, "x"], [2, 3, "x"]]
    assert isinstance(final, SparkStageOperator) and final.spark_conn_id == "spark_connect_eu"
    assert final.python_callable is report.function and final.application_args == []


@task
def shard_list() -> list[int]:
    return [0, 1, 2]


@task
def jobs() -> list[dict[str, object]]:
    return [{"shard": 0, "shards": 2}, {"shard": 1, "shards": 2, "label": "eu"}]


def test_expand_over_another_tasks_output_maps_each_item_to_the_functions_arguments():
    with DAG("ft_decorated_xcom", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        with FailoverPipeline(store=STORE):
            make.partial(shards=3).expand(shard=shard_list())
            tidy.expand_kwargs(jobs().map(lambda job: {"shard": job["shard"]}))
    pipeline = pipeline_of(dag)
    assert pipeline.description.run_time_stages == {"make", "tidy"}
    assert pipeline.regions == [frozenset({"make", "tidy"})]  # the DAG's TaskGroup, one per stage pair
    mapped = dag.task_dict["make"].expand_input.value["application_args"]
    [of_value] = mapped.callables
    assert [of_value(v) for v in (0, 2)] == [[0, 3, "x"], [2, 3, "x"]]
    [pick, of_kwargs] = dag.task_dict["tidy"].expand_input.value["application_args"].callables
    assert of_kwargs(pick({"shard": 1, "shards": 2})) == [1]
    with pytest.raises(TypeError, match="a dict of arguments per map index, got list"):
        of_kwargs([1])


def test_a_plain_call_passes_its_arguments_in_the_functions_order():
    with DAG("ft_decorated_call", schedule=None, start_date=datetime(2026, 1, 1)):
        one = make(0, label="eu", shards=2)
    assert (one.task_id, one.application_args) == ("make", [0, 2, "eu"])


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: make(0), "needs its argument 'shards'"),
        (lambda: make(0, 1, "x", "extra"), "takes 3 arguments after (spark, io)"),
        (lambda: make(0, shard=1, shards=2), "got argument 'shard' twice"),
        (lambda: make.partial(shards=2).expand(shard=[0], nope=[1]), "takes no argument 'nope'"),
        (lambda: make.partial(shard=0).expand(shard=[1]), "'shard' is given to partial and expand"),
        (
            lambda: make.partial(shards=2).expand(shard=range(2)),
            "must be a list or another task's output (an XComArg such as list_files.output), got range",
        ),
        (
            lambda: make.partial(label="y").expand(shard=shard_list(), shards=[2]),
            "expand(shard=<a task's output>) must be the only argument that varies",
        ),
        (lambda: make.expand_kwargs([{"shard": 0}]), "expand_kwargs takes another task's output"),
        (lambda: ft_stage(lambda spark: None), "must take the Spark session and the stage's I/O first"),
        (lambda: ft_stage(lambda spark, io, *rest: None), "no *args, **kwargs or keyword-only"),
        (lambda: ft_stage(application="x.py")(lambda spark, io: None), "@ft_stage sets application itself"),
    ],
    ids=[
        "missing",
        "too-many",
        "twice",
        "unknown",
        "partial-and-expand",
        "not-a-list",
        "output-and-list",
        "kwargs-literal",
        "no-io",
        "star-args",
        "application",
    ],
)
def test_mistakes_are_clear_errors_when_the_dag_is_parsed(build, says):
    with DAG("ft_decorated_errors", schedule=None, start_date=datetime(2026, 1, 1)):
        with pytest.raises(TypeError) as wrong:
            build()
    assert says in str(wrong.value)
