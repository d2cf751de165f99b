"""Pipelines are wired from partitions when the DAG is parsed; miswiring fails there, clearly."""

import pytest
from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline, PipelineWiringError, pipeline_for


def stage(task_id, **kwargs):
    return SparkStageOperator(task_id=task_id, application=f"jobs/{task_id}.py", **kwargs)


def test_dependencies_are_derived_from_partitions_and_regions_become_task_groups():
    #   extract --raw--> enrich ~~enriched (pipelined)~~> score --scored--> report
    with DAG("wiring_ok", schedule=None) as dag:
        with FailoverPipeline(store="s3://bucket/prefix"):
            stage("extract", outputs=["raw"])
            stage("enrich", inputs=["raw"], outputs={"enriched": "pipelined"})
            stage("score", inputs=["enriched"], outputs=["scored"])
            stage("report", inputs=["scored"])
    assert dag.task_dict["enrich"].upstream_task_ids == {"extract"}
    assert dag.task_dict["score"].upstream_task_ids == {"enrich"}
    assert dag.task_dict["report"].upstream_task_ids == {"score"}
    pipeline = pipeline_for("wiring_ok")
    assert set(pipeline.regions) == {
        frozenset({"extract"}), frozenset({"enrich", "score"}), frozenset({"report"}),
    }
    group = dag.task_dict["enrich"].task_group
    assert group.group_id == "region_enrich"
    assert set(group.children) == {"enrich", "score"}
    assert dag.task_dict["score"].task_id == "score"  # no group prefix: task ids stay the stage names
    assert dag.task_dict["extract"].task_group.group_id is None  # single-stage regions stay ungrouped


def test_mapped_stage_parallelism_comes_from_the_literal_expand_list():
    #   shard_read[0..2] --part (pointwise)--> shard_clean[0..2] --clean (all-to-all)--> merge
    with DAG("wiring_mapped", schedule=None):
        with FailoverPipeline(store="s3://bucket/prefix"):
            SparkStageOperator.partial(task_id="shard_read", application="r.py", outputs=["part"]).expand(
                application_args=[["a"], ["b"], ["c"]]
            )
            SparkStageOperator.partial(
                task_id="shard_clean", application="c.py", inputs={"part": "pointwise"}, outputs=["clean"]
            ).expand(application_args=[["a"], ["b"], ["c"]])
            stage("merge", inputs=["clean"])
    pipeline = pipeline_for("wiring_mapped")
    assert pipeline.graph.stages["shard_read"].parallelism == 3
    assert frozenset({"shard_clean[1]"}) in pipeline.regions
    strategy = pipeline.description.failover_strategy()
    assert strategy.tasks_to_restart("shard_clean[1]", ["part[1]"]) == {"shard_read[1]", "shard_clean[1]", "merge"}


def test_explicit_edge_that_matches_a_partition_is_accepted():
    with DAG("wiring_explicit", schedule=None) as dag:
        with FailoverPipeline():
            a = stage("a", outputs=["x"])
            b = stage("b", inputs=["x"])
            a >> b
    assert dag.task_dict["b"].upstream_task_ids == {"a"}


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda: (stage("a", outputs=["x"]) >> stage("b", outputs=["y"])),
            r"the edge a >> b contradicts the declared partitions: 'b' consumes none of the results of 'a' \(\['x'\]\)",
        ),
        (
            lambda: (stage("a", inputs=["y"], outputs=["x"]), stage("b", inputs=["x"], outputs=["y"])),
            r"form a cycle: a -> b -> a",
        ),
        (lambda: stage("a", inputs=["nothing"]), r"consumes result 'nothing', which no stage of the pipeline produces"),
        (lambda: (stage("a", outputs=["cleaned"]), stage("b", inputs=["claened"])), r"did you mean 'cleaned'"),
        (lambda: (stage("a", outputs=["x"]), stage("b", outputs=["x"])), r"result 'x' is produced by both 'a' and 'b'"),
        (lambda: stage("a", inputs=["x"], outputs=["x"]), r"consumes its own output 'x'"),
        (lambda: stage("a", outputs={"x": "streaming"}), r"output 'x': unknown value 'streaming'; use one of 'blocking', 'pipelined'"),
        (lambda: stage("a", inputs={"x": "broadcast"}), r"input 'x': unknown value 'broadcast'"),
        (lambda: stage("a", outputs=["x", "x"]), r"output 'x' is declared twice"),
    ],
)
def test_miswired_pipelines_fail_at_parse_time(build, message):
    with pytest.raises(ValueError, match=message):
        with DAG(f"wiring_bad_{abs(hash(message))}", schedule=None):
            with FailoverPipeline():
                build()


def test_invalid_restart_strategy_fails_at_parse_time():
    with pytest.raises(ValueError, match=r"backoff-multiplier must be ≥ 1, got 0.5"):
        with DAG("wiring_bad_strategy", schedule=None):
            with FailoverPipeline(restart_strategy={
                "restart-strategy.type": "exponential-delay",
                "restart-strategy.exponential-delay.backoff-multiplier": 0.5,
            }):
                stage("a")


def test_dynamic_mapping_is_refused_because_regions_need_parallelism():
    from airflow.sdk import task

    with pytest.raises(PipelineWiringError, match=r"must be known when the DAG is parsed"):
        with DAG("wiring_dynamic", schedule=None):
            @task
            def shards():
                return [["a"], ["b"]]

            with FailoverPipeline():
                SparkStageOperator.partial(task_id="s", application="s.py").expand(application_args=shards())


@pytest.fixture
def cluster_config():
    """Set [ft_provider] keys as airflow.cfg would; removed afterwards."""
    from airflow.sdk import conf

    keys = []

    def set_key(key, value):
        conf.set("ft_provider", key, value)
        keys.append(key)

    yield set_key
    for key in keys:
        conf.remove_option("ft_provider", key)


def test_cluster_restart_strategy_from_airflow_cfg_is_overridden_key_by_key(cluster_config):
    cluster_config("restart-strategy.type", "fixed-delay")
    cluster_config("restart-strategy.fixed-delay.attempts", "7")
    cluster_config("restart-strategy.fixed-delay.delay", "3 s")
    with DAG("cluster_default", schedule=None):
        with FailoverPipeline(store="s3://bucket/prefix"):
            stage("a", outputs=["x"])
    assert repr(pipeline_for("cluster_default").description.restart_strategy()) == "FixedDelay(attempts=7, delay=3 s)"
    with DAG("cluster_overridden", schedule=None):
        with FailoverPipeline(store="s3://bucket/prefix", restart_strategy={"restart-strategy.fixed-delay.attempts": 2}):
            stage("a", outputs=["x"])
    assert repr(pipeline_for("cluster_overridden").description.restart_strategy()) == "FixedDelay(attempts=2, delay=3 s)"


def test_a_bad_cluster_value_fails_the_parse_and_says_where_it_was_set(cluster_config):
    cluster_config("jobmanager.execution.failover-strategy", "regional")
    with pytest.raises(ValueError, match=r"got 'regional'.*\(set in \[ft_provider\] of airflow.cfg\)"):
        with DAG("cluster_bad", schedule=None):
            with FailoverPipeline(store="s3://bucket/prefix"):
                stage("a", outputs=["x"])



def test_parsing_a_pipeline_imports_none_of_a_tasks_run_time_machinery(tmp_path):
    """The DAG processor imports the operator modules again for every parse: what only a running try
    needs (partition transfer, Spark spec, recovery journal, fault injection) stays out of a parse."""
    import json
    import subprocess
    import sys

    dag_file = tmp_path / "parse_only.py"
    dag_file.write_text(
        "from airflow.sdk import DAG\n"
        "from airflow_ft_provider.operators.spark_stage import SparkStageOperator\n"
        "from airflow_ft_provider.pipeline import FailoverPipeline\n"
        "with DAG('parse_only', schedule=None):\n"
        "    with FailoverPipeline(store='s3://bucket/prefix'):\n"
        "        SparkStageOperator(task_id='a', application='a.py', outputs=['raw'])\n"
        "        SparkStageOperator(task_id='b', application='b.py', inputs=['raw'], outputs={'x': 'pipelined'})\n"
        "        SparkStageOperator(task_id='c', application='c.py', inputs=['x'])\n"
    )
    probe = (
        "import json, runpy, sys\n"
        f"runpy.run_path({str(dag_file)!r})\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('airflow_ft_provider'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert {"airflow_ft_provider.pipeline", "airflow_ft_provider.operators.spark_stage"} <= loaded
    run_time_only = {
        "airflow_ft_provider.operators.stage_attempt",
        "airflow_ft_provider.execution.backend",
        "airflow_ft_provider.execution.connect",
        "airflow_ft_provider.execution.placement",
        "airflow_ft_provider.execution.submit",
        "airflow_ft_provider.partitions.pipelined",
        "airflow_ft_provider.spark.spec",
        "airflow_ft_provider.faults",
        "airflow_ft_provider.policies.recovery_journal",
        "airflow_ft_provider.policies.region_failover",
        "airflow_ft_provider.failover.recovery",
        "airflow_ft_provider.hooks.partition_store",
    }
    assert loaded & run_time_only == set()
