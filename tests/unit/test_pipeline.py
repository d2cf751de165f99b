"""Pipelines are wired from partitions when the DAG is parsed; miswiring fails there, clearly."""

import re
from datetime import timedelta

import pytest
from airflow.sdk import DAG

from airflow_ft_provider.operators.spark_stage import SparkStageOperator
from airflow_ft_provider.pipeline import FailoverPipeline, PipelineWiringError, pipeline_of


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
    pipeline = pipeline_of(dag)
    assert set(pipeline.regions) == {
        frozenset({"extract"}),
        frozenset({"enrich", "score"}),
        frozenset({"report"}),
    }
    group = dag.task_dict["enrich"].task_group
    assert group.group_id == "region_enrich"
    assert set(group.children) == {"enrich", "score"}
    assert dag.task_dict["score"].task_id == "score"  # no group prefix: task ids stay the stage names
    assert dag.task_dict["extract"].task_group.group_id is None  # single-stage regions stay ungrouped


def test_mapped_stage_parallelism_comes_from_the_literal_expand_list():
    #   shard_read[0..2] --part (pointwise)--> shard_clean[0..2] --clean (all-to-all)--> merge
    with DAG("wiring_mapped", schedule=None) as dag:
        with FailoverPipeline(store="s3://bucket/prefix"):
            SparkStageOperator.partial(task_id="shard_read", application="r.py", outputs=["part"]).expand(
                application_args=[["a"], ["b"], ["c"]]
            )
            SparkStageOperator.partial(
                task_id="shard_clean", application="c.py", inputs={"part": "pointwise"}, outputs=["clean"]
            ).expand(application_args=[["a"], ["b"], ["c"]])
            stage("merge", inputs=["clean"])
    pipeline = pipeline_of(dag)
    assert pipeline.graph.stages["shard_read"].parallelism == 3
    assert frozenset({"shard_clean[1]"}) in pipeline.regions
    strategy = pipeline.description.failover_strategy()
    assert strategy.tasks_to_restart("shard_clean[1]", ["part[1]"]) == {
        "shard_read[1]",
        "shard_clean[1]",
        "merge",
    }


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
            lambda: stage("a", outputs=["x"]) >> stage("b", outputs=["y"]),
            r"the edge a >> b contradicts the declared partitions: "
            r"'b' consumes none of the results of 'a' \(\['x'\]\)",
        ),
        (
            lambda: (stage("a", inputs=["y"], outputs=["x"]), stage("b", inputs=["x"], outputs=["y"])),
            r"form a cycle: a -> b -> a",
        ),
        (
            lambda: stage("a", inputs=["nothing"]),
            r"consumes result 'nothing', which no stage of the pipeline produces",
        ),
        (
            lambda: (stage("a", outputs=["cleaned"]), stage("b", inputs=["claened"])),
            r"did you mean 'cleaned'",
        ),
        (
            lambda: (stage("a", outputs=["x"]), stage("b", outputs=["x"])),
            r"result 'x' is produced by both 'a' and 'b'",
        ),
        (lambda: stage("a", inputs=["x"], outputs=["x"]), r"consumes its own output 'x'"),
        (
            lambda: stage("a", outputs={"x": "streaming"}),
            r"output 'x': unknown value 'streaming'; use one of 'blocking', 'pipelined'",
        ),
        (lambda: stage("a", inputs={"x": "broadcast"}), r"input 'x': unknown value 'broadcast'"),
        (lambda: stage("a", outputs=["x", "x"]), r"output 'x' is declared twice"),
        (
            lambda: stage("a", outputs=["x"], reuse="no"),
            r"stage 'a': reuse must be one of 'off', 'within-run', 'across-runs', got 'no'",
        ),
    ],
)
def test_miswired_pipelines_fail_at_parse_time(build, message):
    with pytest.raises(ValueError, match=message):
        with DAG(f"wiring_bad_{abs(hash(message))}", schedule=None):
            with FailoverPipeline():
                build()


def test_invalid_restart_strategy_fails_at_parse_time():
    # Flink's checkArgument(backoffMultiplier > 1, ...): "≥ 1" was the old, non-Flink rule.
    with pytest.raises(ValueError, match=r"backoff-multiplier must be > 1, got 0.5"):
        with DAG("wiring_bad_strategy", schedule=None):
            with FailoverPipeline(
                restart_strategy={
                    "restart-strategy.type": "exponential-delay",
                    "restart-strategy.exponential-delay.backoff-multiplier": 0.5,
                }
            ):
                stage("a")


def test_mapping_over_another_tasks_output_is_counted_at_run_time():
    from airflow.sdk import task

    with DAG("wiring_dynamic", schedule=None) as dag:

        @task
        def shards():
            return [["a"], ["b"]]

        with FailoverPipeline(store="s3://ft-wiring/pipelines/"):
            SparkStageOperator.partial(task_id="s", application="s.py", outputs=["x"]).expand(
                application_args=shards()
            )
            SparkStageOperator(task_id="t", application="t.py", inputs=["x"])
    description = pipeline_of(dag).description
    assert description.run_time_stages == {"s"} and description.pending == {"s", "t"}
    assert dag.task_dict["t"].upstream_task_ids == {"s"}  # wired from the declared graph


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
    with DAG("cluster_default", schedule=None) as default_dag:
        with FailoverPipeline(store="s3://bucket/prefix"):
            stage("a", outputs=["x"])
    assert (
        repr(pipeline_of(default_dag).description.restart_strategy()) == "FixedDelay(attempts=7, delay=3 s)"
    )
    with DAG("cluster_overridden", schedule=None) as overridden_dag:
        with FailoverPipeline(
            store="s3://bucket/prefix", restart_strategy={"restart-strategy.fixed-delay.attempts": 2}
        ):
            stage("a", outputs=["x"])
    assert (
        repr(pipeline_of(overridden_dag).description.restart_strategy())
        == "FixedDelay(attempts=2, delay=3 s)"
    )


def test_a_bad_cluster_value_fails_the_parse_and_says_where_it_was_set(cluster_config):
    cluster_config("jobmanager.execution.failover-strategy", "regional")
    with pytest.raises(ValueError, match=r"got 'regional'.*\(set in \[ft_provider\] of airflow.cfg\)"):
        with DAG("cluster_bad", schedule=None):
            with FailoverPipeline(store="s3://bucket/prefix"):
                stage("a", outputs=["x"])


def test_the_deployments_data_path_applies_to_pipelines_that_name_none(cluster_config):
    from airflow_ft_provider.model.data_path import DataPath

    #   a --x--> b          (data_path: the deployment's, the pipeline's, b's own)
    def build(**pipeline_kwargs):
        with DAG(f"data_path_{len(pipeline_kwargs)}", schedule=None) as dag:
            with FailoverPipeline(store="s3://bucket/prefix", **pipeline_kwargs):
                stage("a", outputs=["x"])
                stage("b", inputs=["x"], outputs=["y"], data_path="staged")
        return pipeline_of(dag).data_paths

    assert build() == {"a": DataPath.EXECUTORS, "b": DataPath.STAGED}  # the provider's default
    cluster_config("data_path", "staged")
    assert build() == {"a": DataPath.STAGED, "b": DataPath.STAGED}
    assert build(data_path="s3a") == {"a": DataPath.S3A, "b": DataPath.STAGED}


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
        "        SparkStageOperator(task_id='b', application='b.py', "
        "inputs=['raw'], outputs={'x': 'pipelined'})\n"
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
        "airflow_ft_provider.stage_try.attempt",
        "airflow_ft_provider.execution.backend",
        "airflow_ft_provider.execution.connect",
        "airflow_ft_provider.execution.placement",
        "airflow_ft_provider.execution.submit",
        "airflow_ft_provider.partitions.pipelined",
        "airflow_ft_provider.spark.spec",
        "airflow_ft_provider.faults",
        "airflow_ft_provider.faults.injection",
        "airflow_ft_provider.recovery.journal",
        "airflow_ft_provider.recovery.run_recovery",
        "airflow_ft_provider.recovery.decide",
        "airflow_ft_provider.recovery.gate",
        "airflow_ft_provider.recovery.journal_schema",
        "airflow_ft_provider.failover.failure_handler",
        "airflow_ft_provider.hooks.partition_store",
    }
    assert loaded & run_time_only == set()


# -- A stage's own retries / retry_policy: refused when the restart strategy owns retries -----------
class OwnPolicy:
    """Stands in for a user's RetryPolicy: only its presence matters here."""

    def __repr__(self):
        return "OwnPolicy()"


@pytest.mark.parametrize(
    "dag_args, build, message",
    [
        # as an argument of the operator
        ({}, lambda: stage("a", retries=3), r"stage 'a' sets retries=3 \(as an argument of the stage\)"),
        ({}, lambda: stage("a", retries=0), r"stage 'a' sets retries=0 \(as an argument of the stage\)"),
        ({}, lambda: stage("a", retry_policy=OwnPolicy()), r"stage 'a' sets retry_policy=OwnPolicy\(\)"),
        # through default_args: the DAG's, or the task's own
        (
            {"default_args": {"retries": 2}},
            lambda: stage("a"),
            r"sets retries=2 \(from default_args of DAG 'own_retries_\d+'\)",
        ),
        (
            {"default_args": {"retry_policy": OwnPolicy()}},
            lambda: stage("a"),
            r"sets retry_policy=OwnPolicy\(\) \(from default_args",
        ),
        ({}, lambda: stage("a", default_args={"retries": 4}), r"stage 'a' sets retries=4"),
        # in .partial() of a mapped stage, directly or through default_args
        (
            {},
            lambda: SparkStageOperator.partial(task_id="m", application="m.py", retries=5).expand(
                application_args=[["x"], ["y"]]
            ),
            r"stage 'm' sets retries=5 \(as an argument of the stage or its .partial\(\)\)",
        ),
        (
            {},
            lambda: SparkStageOperator.partial(
                task_id="m", application="m.py", retry_policy=OwnPolicy()
            ).expand(application_args=[["x"]]),
            r"stage 'm' sets retry_policy=OwnPolicy\(\)",
        ),
        (
            {"default_args": {"retries": 6}},
            lambda: SparkStageOperator.partial(task_id="m", application="m.py").expand(
                application_args=[["x"]]
            ),
            r"stage 'm' sets retries=6 \(from default_args of DAG",
        ),
    ],
)
def test_a_stages_own_retries_or_retry_policy_are_refused_at_parse_time(dag_args, build, message):
    """Issue 13: FailoverPipeline used to overwrite them without a word. The error names the stage, the
    argument, why (the restart strategy decides) and the fix."""
    with pytest.raises(PipelineWiringError, match=message) as caught:
        with DAG(f"own_retries_{abs(hash(message))}", schedule=None, **dag_args):
            with FailoverPipeline(store="s3://bucket/prefix"):
                build()
    assert "the restart strategy decides whether and when a stage runs again" in str(caught.value)
    assert "configure restarts with restart_strategy=" in str(caught.value)


def test_airflows_defaults_and_other_tasks_retries_are_left_alone():
    from airflow.providers.standard.operators.empty import EmptyOperator

    from airflow_ft_provider.pipeline import RETRY_BUDGET

    with DAG("own_retries_defaults", schedule=None) as dag:
        notify = EmptyOperator(task_id="notify", retries=2)  # not a stage: its retries stay
        with FailoverPipeline(store="s3://bucket/prefix"):
            a = stage("a", outputs=["x"])
            SparkStageOperator.partial(task_id="m", application="m.py", inputs=["x"]).expand(
                application_args=[["x"], ["y"]]
            )
        a >> notify
    assert dag.task_dict["a"].retries == RETRY_BUDGET
    assert dag.task_dict["m"].partial_kwargs["retries"] == RETRY_BUDGET
    # tries the policy never sees (dead before their code ran) back off, a minute apart at most
    assert dag.task_dict["a"].retry_exponential_backoff == 2.0
    assert dag.task_dict["m"].partial_kwargs["max_retry_delay"] == timedelta(minutes=1)
    assert type(dag.task_dict["a"].retry_policy).__name__ == "FailoverRetryPolicy"
    assert dag.task_dict["notify"].retries == 2


def test_without_a_partition_store_a_stage_keeps_airflows_own_retries():
    # No store: no region failover and no retry policy installed (README), so nothing is overwritten.
    with DAG("own_retries_no_store", schedule=None) as dag:
        with FailoverPipeline():
            stage("a", retries=3)
    assert dag.task_dict["a"].retries == 3 and dag.task_dict["a"].retry_policy is None


# -- DAG ids the partition store cannot use ----------------------------------------------------------
@pytest.mark.parametrize("dag_id", ["-etl", "état", ".hidden", "naïve_etl"])
def test_dag_ids_the_store_rejects_are_refused_at_parse_time(dag_id):
    """Issue 18: Airflow accepts these DAG ids, the partition store does not: every stage used to fail
    at run time. Refused when the pipeline is declared, with the value and the allowed characters."""
    with pytest.raises(
        PipelineWiringError,
        match=(
            rf"DAG id {dag_id!r} cannot name a failover pipeline: "
            rf"invalid pipeline name {dag_id!r}: use letters, "
            r"digits, '_', '.' or '-', starting with a letter, digit or '_'.*rename the DAG"
        ),
    ):
        with DAG(dag_id, schedule=None):
            with FailoverPipeline():
                stage("a")


# -- The deprecated key 'restart-strategy' -------------------------------------------------------
def one_stage_pipeline(dag_id, **pipeline_kwargs):
    """A DAG file's ``with DAG(dag_id): with FailoverPipeline(store=..., **pipeline_kwargs): stage("a")``."""
    with DAG(dag_id, schedule=None) as dag:
        with FailoverPipeline(store="s3://bucket/prefix", **pipeline_kwargs):
            stage("a")
    return pipeline_of(dag)


def test_deprecated_restart_strategy_key_of_a_pipeline_is_honoured_with_a_warning():
    from airflow_ft_provider.failover.restart_config import DeprecatedConfigKeyWarning

    old_style = {"restart-strategy": "fixed-delay", "restart-strategy.fixed-delay.attempts": 4}
    with pytest.warns(
        DeprecatedConfigKeyWarning,
        match=(
            r"the key 'restart-strategy' in restart_strategy= of FailoverPipeline "
            r"is deprecated \(as in Flink\) "
            r"and read as 'restart-strategy.type': 'fixed-delay'; rename it"
        ),
    ) as record:
        pipeline = one_stage_pipeline("deprecated_key", restart_strategy=old_style)
    assert record[0].filename == __file__  # points at the DAG author's line, not into the provider
    assert repr(pipeline.description.restart_strategy()) == "FixedDelay(attempts=4, delay=1 s)"
    assert "restart-strategy" not in pipeline.restart_config  # stored under the new key only


def test_deprecated_key_in_airflow_cfg_is_honoured_and_the_pipelines_key_still_wins(cluster_config):
    from airflow_ft_provider.failover.restart_config import DeprecatedConfigKeyWarning

    cluster_config("restart-strategy", "none")
    with pytest.warns(
        DeprecatedConfigKeyWarning, match=r"'restart-strategy' in \[ft_provider\] of airflow.cfg"
    ):
        pipeline = one_stage_pipeline("deprecated_cluster_key")
    assert repr(pipeline.description.restart_strategy()) == "NoRestart()"
    with pytest.warns(DeprecatedConfigKeyWarning):
        pipeline = one_stage_pipeline(
            "deprecated_cluster_key_overridden", restart_strategy={"restart-strategy.type": "fixed-delay"}
        )
    assert repr(pipeline.description.restart_strategy()).startswith("FixedDelay")


def test_a_pipelines_deprecated_key_overrides_the_clusters_new_key(cluster_config):
    # Flink reads a job's option together with its deprecated keys before falling back to the cluster.
    cluster_config("restart-strategy.type", "fixed-delay")
    with pytest.warns(FutureWarning):
        pipeline = one_stage_pipeline("deprecated_job_key", restart_strategy={"restart-strategy": "none"})
    assert repr(pipeline.description.restart_strategy()) == "NoRestart()"


def test_the_deprecation_warning_reaches_the_dag_processor(tmp_path):
    """What a DAG author sees at parse time: Airflow's DagBag records the warnings a DAG file raises
    while it is imported (and logs them in the DAG processor's log). Under Python's default warning
    filters it never sees a DeprecationWarning raised outside __main__, which is why the warning is a
    FutureWarning. Run in a fresh interpreter: pytest's own filters would show DeprecationWarnings."""
    import json
    import os
    import subprocess
    import sys

    dag_file = tmp_path / "old_flink_key.py"
    dag_file.write_text(
        "from airflow.sdk import DAG\n"
        "from airflow_ft_provider.operators.spark_stage import SparkStageOperator\n"
        "from airflow_ft_provider.pipeline import FailoverPipeline\n"
        "with DAG('old_flink_key', schedule=None):\n"
        "    with FailoverPipeline(store='s3://bucket/prefix', "
        "restart_strategy={'restart-strategy': 'fixeddelay'}):\n"
        "        SparkStageOperator(task_id='a', application='a.py')\n"
    )
    probe = (
        "import json, logging, warnings\n"
        "logging.disable(logging.CRITICAL)\n"
        "warnings.simplefilter('ignore', UserWarning)  # DagBag re-emits what it recorded as UserWarnings\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        f"bag = DagBag(dag_folder={str(tmp_path)!r})\n"
        "print(json.dumps({'dags': bag.dag_ids, 'errors': bag.import_errors,\n"
        "                  'warnings': {k: list(v) for k, v in bag.captured_warnings.items()}}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env, timeout=300
    )
    parsed = json.loads(out.stdout.strip().splitlines()[-1])
    assert parsed["errors"] == {} and "old_flink_key" in parsed["dags"]
    recorded = parsed["warnings"].get(str(dag_file), [])
    assert len(recorded) == 1, f"the DAG processor recorded {recorded}"
    assert recorded[0].startswith(
        f"{dag_file}:5: airflow_ft_provider.failover.restart_config.DeprecatedConfigKeyWarning"
    )
    assert "'restart-strategy'" in recorded[0] and "rename it to 'restart-strategy.type'" in recorded[0]


def test_stages_joined_by_a_pipelined_exchange_must_share_their_spark_connection():
    #   extract --raw--> enrich ~~enriched~~> score      enrich on Spark Connect, score on spark-submit
    with DAG("wiring_two_engines", schedule=None):
        with pytest.raises(PipelineWiringError) as excinfo:
            with FailoverPipeline(store="s3://bucket/prefix", spark_conn_id="spark_connect"):
                stage("extract", outputs=["raw"], spark_conn_id="spark_submit")  # blocking: may differ
                stage("enrich", inputs=["raw"], outputs={"enriched": "pipelined"})
                stage("score", inputs=["enriched"], outputs=["scored"], spark_conn_id="spark_submit")
    message = str(excinfo.value)
    assert "'enrich' and 'score' exchange the pipelined result 'enriched'" in message
    assert "('spark_connect', 'spark_submit')" in message and "same spark_conn_id" in message


def test_a_stage_needs_exactly_one_of_application_and_python_callable():
    with DAG("wiring_callable", schedule=None):
        with pytest.raises(ValueError, match="either application= .* or python_callable=.*not neither"):
            SparkStageOperator(task_id="nothing", outputs=["x"])
        with pytest.raises(ValueError, match="not both"):
            SparkStageOperator(task_id="both", application="a.py", python_callable=print, outputs=["x"])
    with DAG("wiring_callable_mapped", schedule=None):
        with pytest.raises(PipelineWiringError, match=r"\.partial\(\) either application=.*not neither"):
            with FailoverPipeline(store="s3://bucket/prefix"):
                SparkStageOperator.partial(task_id="m", outputs=["x"]).expand(application_args=[[], []])


def test_the_run_end_release_follows_the_authors_own_dag_callbacks_and_reaches_the_serialized_dag():
    from airflow.serialization.serialized_objects import DagSerialization

    from airflow_ft_provider.run_end import RunEnd

    def notify(context):
        pass

    with DAG("wiring_run_end", schedule=None, on_failure_callback=notify) as dag:
        with FailoverPipeline(store="s3://bucket/prefix"):
            stage("a", outputs={"x": "pipelined"})
            stage("b", inputs=["x"], outputs=["y"])
            stage("c", inputs=["y"], spark_conn_id="spark_c")
    assert dag.on_failure_callback[0] is notify
    ends = [dag.on_success_callback[-1], dag.on_failure_callback[-1]]
    assert [type(e) for e in ends] == [RunEnd, RunEnd] and [e.succeeded for e in ends] == [True, False]
    assert ends[0].pipeline.stage_connections == {"a": "spark_default", "b": "spark_default", "c": "spark_c"}
    assert ends[0].pipeline.description.pipelined_partitions() == ["x"]
    serialized = DagSerialization.to_dict(dag)["dag"]
    assert serialized.get("has_on_success_callback") and serialized.get("has_on_failure_callback")


def test_without_a_store_a_pipeline_adds_no_dag_callbacks():
    with DAG("wiring_run_end_no_store", schedule=None) as dag:
        with FailoverPipeline():
            stage("a", outputs=["x"])
    assert dag.on_success_callback is None and dag.on_failure_callback is None


def test_the_default_restart_strategy_of_a_batch_pipeline_ends_and_flinks_unbounded_one_is_one_key_away(
    monkeypatch,
):
    from airflow_ft_provider.get_provider_info import get_provider_info
    from airflow_ft_provider.recovery import layered_restarts

    ed = "restart-strategy.exponential-delay."
    options = get_provider_info()["config"]["ft_provider"]["options"]
    assert options[ed + "attempts-before-reset-backoff"]["default"] == "10"  # what airflow.cfg is given
    monkeypatch.setattr(layered_restarts, "cluster_keys", lambda keys: {})  # an airflow.cfg that sets none
    strategy = one_stage_pipeline("defaults_end").description.restart_strategy()
    assert type(strategy).__name__ == "ExponentialDelayRestartStrategy"
    assert strategy.attempts_before_reset_backoff == 10
    unbounded = one_stage_pipeline(
        "flink_unbounded", restart_strategy={ed + "attempts-before-reset-backoff": "infinite"}
    ).description.restart_strategy()
    assert unbounded.attempts_before_reset_backoff == float("inf")


def test_a_misspelt_restart_key_is_a_wiring_error_with_a_suggestion_like_every_other_setting():
    with pytest.raises(PipelineWiringError, match=r"did you mean 'restart-strategy.fixed-delay.attempts'\?"):
        one_stage_pipeline("misspelt_restart", restart_strategy={"restart-strategy.fixed-delay.atempts": 3})
    with pytest.raises(PipelineWiringError, match=r"backoff-multiplier must be > 1, got 0.5"):
        one_stage_pipeline(
            "bad_restart_value",
            restart_strategy={"restart-strategy.exponential-delay.backoff-multiplier": 0.5},
        )


def test_a_misspelt_checkpoint_key_suggests_the_key_meant():
    with pytest.raises(PipelineWiringError, match=r"did you mean 'execution.checkpointing.interval'\?"):
        one_stage_pipeline(
            "misspelt_checkpoint", checkpointing={"execution.checkpointing.intervall": "1 min"}
        )


def test_a_stage_sized_by_its_inputs_gets_a_planner_that_runs_after_their_producers():
    from airflow_ft_provider.decorators import ft_stage
    from airflow_ft_provider.model.auto_parallelism import AVG_VOLUME
    from airflow_ft_provider.operators.auto_parallelism import AutoParallelismOperator, auto_parallelism

    @ft_stage(inputs=["raw"], outputs=["scored"])
    def score(spark, io, shard, shards):
        pass

    with DAG("wiring_auto", schedule=None) as dag:
        with FailoverPipeline(store="s3://ft-wiring/pipelines/"):
            SparkStageOperator(task_id="extract", application="e.py", outputs=["raw"])
            SparkStageOperator(task_id="other", application="o.py", outputs=["unrelated"])
            score.expand_kwargs(auto_parallelism({AVG_VOLUME: "256 MB"}))
    planner = dag.task_dict["auto_parallelism"]
    assert isinstance(planner, AutoParallelismOperator) and planner.stage == "score"
    assert planner.upstream_task_ids == {"extract"}  # sized when raw is committed, not before
    assert dag.task_dict["score"].upstream_task_ids == {"extract", "auto_parallelism"}
    assert pipeline_of(dag).description.run_time_stages == {"score"}
    [of_kwargs] = dag.task_dict["score"].expand_input.value["application_args"].callables
    assert of_kwargs({"shard": 2, "shards": 5}) == [2, 5]


@pytest.mark.parametrize(
    "build, says",
    [
        ("unbound", "'auto_parallelism' (auto_parallelism) sizes no stage"),
        ("pipelined", "reads the pipelined result 'raw', whose size is known only as it is read"),
        ("no_inputs", "reads no input to size its shards by"),
        ("bad_key", "unknown key 'avg-data-volume'"),
    ],
)
def test_a_planner_that_cannot_size_its_stage_is_a_parse_error(build, says):
    from airflow_ft_provider.operators.auto_parallelism import auto_parallelism

    with pytest.raises(PipelineWiringError, match=re.escape(says)):
        with DAG(f"wiring_auto_{build}", schedule=None):
            with FailoverPipeline(store="s3://ft-wiring/pipelines/"):
                outputs = {"raw": "pipelined"} if build == "pipelined" else ["raw"]
                SparkStageOperator(task_id="extract", application="e.py", outputs=outputs)
                shards = auto_parallelism({"avg-data-volume": 1} if build == "bad_key" else None)
                if build == "unbound":  # nothing expands over it
                    SparkStageOperator(task_id="score", application="s.py", inputs=["raw"])
                else:
                    inputs = [] if build == "no_inputs" else ["raw"]
                    SparkStageOperator.partial(task_id="score", application="s.py", inputs=inputs).expand(
                        application_args=shards
                    )


def test_a_spark_application_sized_by_its_inputs_gets_its_shard_as_arguments_and_the_dag_serializes():
    from airflow.serialization.serialized_objects import DagSerialization

    from airflow_ft_provider.operators.auto_parallelism import auto_parallelism, shard_arguments

    with DAG("wiring_auto_application", schedule=None) as dag:
        with FailoverPipeline(store="s3://ft-wiring/pipelines/"):
            SparkStageOperator(task_id="extract", application="e.py", outputs=["raw"])
            SparkStageOperator.partial(task_id="score", application="s.py", inputs=["raw"]).expand(
                application_args=auto_parallelism().map(shard_arguments)
            )
    assert dag.task_dict["auto_parallelism"].stage == "score"
    assert shard_arguments({"shard": 1, "shards": 4}) == ["1", "4"]  # argv of shard 1 of 4
    assert DagSerialization.to_dict(dag)["dag"]["dag_id"] == "wiring_auto_application"  # the scheduler's form
