"""One test per assumption ``airflow_ft_provider._compat`` makes about Airflow internals.

When an Airflow upgrade breaks one, the failure names it here instead of surfacing as a miswired
pipeline. (RETRY_BUDGET's assumption -- a retry policy cannot grant more tries than ``retries`` -- needs
the task runner and the API server: it is proven live by the ``policy_capped`` task of
tests/e2e/test_airflow_mechanics.py::test_retry_policy_delay_and_fail.)
"""

from datetime import timedelta

from airflow.sdk import DAG, Asset, TaskGroup
from airflow.serialization.serialized_objects import DagSerialization

from airflow_ft_provider import _compat
from airflow_ft_provider.operators.spark_stage import SparkStageOperator


def plain(task_id, **kwargs):
    return SparkStageOperator(task_id=task_id, application="a.py", **kwargs)


def mapped(task_id, n=3, **kwargs):
    return SparkStageOperator.partial(task_id=task_id, application="a.py", **kwargs).expand(
        application_args=[[str(i)] for i in range(n)]
    )


def test_current_dag_is_the_dag_whose_with_block_is_open():
    assert _compat.current_dag() is None
    with DAG("compat_current", schedule=None) as dag:
        assert _compat.current_dag() is dag
    assert _compat.current_dag() is None


def test_mapped_tasks_are_recognised_and_name_their_operator_class():
    with DAG("compat_mapped", schedule=None):
        m = mapped("m")
        p = plain("p")
    assert _compat.is_mapped(m) and not _compat.is_mapped(p)
    assert _compat.mapped_operator_class(m) is SparkStageOperator


def test_map_length_at_parse_comes_from_literal_expand_arguments():
    with DAG("compat_map_length", schedule=None):
        three = mapped("three")
        product = SparkStageOperator.partial(task_id="product", application="a.py").expand(
            application_args=[["a"], ["b"]], conf=[{"x": "1"}, {"x": "2"}, {"x": "3"}]
        )
        empty = mapped("empty", n=0)
    assert _compat.map_length_at_parse(three) == 3
    assert _compat.map_length_at_parse(product) == 6  # expand() over two lists: the cross product
    assert _compat.map_length_at_parse(empty) == 1


def test_given_arguments_include_default_args_for_plain_and_mapped_tasks():
    with DAG("compat_given", schedule=None, default_args={"owner": "team-a", "retries": 2}):
        p = plain("p", spark_conn_id="spark_x")
        m = mapped("m", spark_conn_id="spark_y")
    assert _compat.given_arguments(p)["spark_conn_id"] == "spark_x"
    assert _compat.given_arguments(p)["retries"] == 2  # from default_args
    assert "pool" not in _compat.given_arguments(p)  # what nobody gave is not listed
    assert _compat.given_arguments(m)["spark_conn_id"] == "spark_y"
    assert _compat.given_arguments(m)["retries"] == 2


def test_arguments_set_after_creation_reach_the_serialized_dag():
    with DAG("compat_set", schedule=None) as dag:
        p = plain("p")
        m = mapped("m")
    for task in (p, m):
        _compat.set_arguments(task, retries=7, retry_delay=timedelta(seconds=3))
    tasks = {t["__var"]["task_id"]: t["__var"] for t in DagSerialization.to_dict(dag)["dag"]["tasks"]}
    assert tasks["p"]["retries"] == 7
    assert tasks["m"]["partial_kwargs"]["retries"] == 7
    restored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert restored.task_dict["p"].retries == 7
    assert restored.task_dict["m"].partial_kwargs["retries"] == 7


def test_added_outlets_are_kept_on_plain_and_mapped_tasks():
    asset = Asset(uri="s3://bucket/prefix/compat/x", group="ft-partitions")
    with DAG("compat_outlets", schedule=None) as dag:
        p = plain("p")
        m = mapped("m")
    for task in (p, m):
        _compat.add_outlets(task, [asset])
    restored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert [o.uri for o in restored.task_dict["p"].outlets] == [asset.uri]
    outlets = restored.task_dict["m"].partial_kwargs["outlets"]
    assert [getattr(o, "uri", None) or o["__var"]["uri"] for o in outlets] == [asset.uri]


def test_a_task_moves_from_the_root_group_into_a_task_group():
    with DAG("compat_group", schedule=None) as dag:
        a = plain("a")
        plain("b")
    group = TaskGroup("region_a", dag=dag, parent_group=dag.task_group, prefix_group_id=False)
    _compat.move_into_group(a, group)
    assert a.task_group.group_id == "region_a" and "a" in group.children
    assert "a" not in dag.task_group.children and "b" in dag.task_group.children
    restored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert restored.task_dict["a"].task_group.group_id == "region_a"
    assert restored.task_dict["b"].task_group.group_id is None


def test_dag_callbacks_requested_after_creation_reach_the_serialized_dag():
    with DAG("compat_callbacks", schedule=None) as dag:
        plain("p")
    before = DagSerialization.to_dict(dag)["dag"]
    assert not before.get("has_on_success_callback") and not before.get("has_on_failure_callback")
    dag.on_success_callback = [lambda context: None]
    assert not DagSerialization.to_dict(dag)["dag"].get("has_on_success_callback")  # why it is needed
    _compat.request_dag_callbacks(dag)
    after = DagSerialization.to_dict(dag)["dag"]
    assert after.get("has_on_success_callback") and after.get("has_on_failure_callback")


def test_redact_secrets_masks_what_the_task_sdk_masker_knows():
    from airflow.sdk.log import mask_secret

    mask_secret("compat-secret-value-4711")
    assert _compat.redact_secrets("password is compat-secret-value-4711!") == "password is ***!"
