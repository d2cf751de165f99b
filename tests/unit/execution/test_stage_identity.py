"""The pure parts of reuse: a stage's identity, the lineage key, and the output marker's validation."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from airflow_ft_provider.execution.stage_identity import stage_identity
from airflow_ft_provider.execution.submit import parse_output_marker
from airflow_ft_provider.partitions.provenance import lineage_key

A = "rows1:" + "aa" * 16
B = "rows1:" + "bb" * 16


@dataclass(frozen=True)
class Stage:
    application: str | None = None
    python_callable: Any = None
    application_args: list[Any] = field(default_factory=list)
    conf: dict[str, Any] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    task_id: str = "t"
    dag_id: str = "d"


def transform(spark, io):
    io.write("out", io.read("in"))


def test_lineage_depends_on_every_input_and_the_identity_but_not_their_order():
    key = lineage_key("id", {"x[0]": A, "x[1]": B})
    assert key == lineage_key("id", {"x[1]": B, "x[0]": A})
    assert key != lineage_key("id", {"x[0]": B, "x[1]": A})
    assert key != lineage_key("id2", {"x[0]": A, "x[1]": B})
    assert key != lineage_key("id", {"x[0]": A})


def test_identity_follows_code_arguments_env_and_result_affecting_conf(tmp_path):
    app = tmp_path / "app.py"
    app.write_text("print(1)\n")
    stage = Stage(application=str(app), application_args=["2"], conf={"spark.sql.ansi.enabled": "true"})
    first = stage_identity(stage)
    assert first is not None and len(first) == 64
    assert stage_identity(replace(stage, conf={**stage.conf, "spark.ui.enabled": "false"})) == first
    assert stage_identity(replace(stage, conf={**stage.conf, "spark.executor.memory": "8g"})) == first
    assert stage_identity(replace(stage, conf={"spark.sql.ansi.enabled": "false"})) != first
    assert stage_identity(replace(stage, application_args=["3"])) != first
    assert stage_identity(replace(stage, env_vars={"MODE": "x"})) != first
    app.write_text("print(2)\n")  # the application changed
    assert stage_identity(stage) != first


def test_identity_of_a_callable_is_its_source_and_unreadable_code_has_none(tmp_path):
    assert stage_identity(Stage(python_callable=transform)) is not None
    assert stage_identity(Stage(python_callable=transform)) != stage_identity(
        Stage(python_callable=test_lineage_depends_on_every_input_and_the_identity_but_not_their_order)
    )
    assert stage_identity(Stage(application="s3a://bucket/app.py")) is None
    assert stage_identity(Stage(python_callable=len)) is None  # a builtin has no source
    assert stage_identity(Stage()) is None


def test_output_marker_is_validated():
    assert parse_output_marker(b'{"result": "x", "rows": 3, "content": null}', where="m").rows == 3
    assert parse_output_marker(f'{{"rows": 3, "content": "{A}"}}'.encode(), where="m").content == A
    for bad, problem in (
        (b'{"rows": -1}', "'rows' must be a whole number"),
        (b'{"rows": true}', "'rows' must be a whole number"),
        (b'{"rows": 1, "content": "rows1:zz"}', "'content' must be"),
        (b'{"content": null}', "rows"),
        (b"[1]", "invalid"),
        (b"not json", "invalid"),
    ):
        with pytest.raises(ValueError, match="output marker s3://b/out/_FT_OUTPUT.json is invalid") as info:
            parse_output_marker(bad, where="s3://b/out/_FT_OUTPUT.json")
        assert problem in str(info.value)
