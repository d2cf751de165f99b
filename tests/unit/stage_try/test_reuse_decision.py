"""A try's reuse decision (stage_try/reuse.py) against the S3 endpoint: from the second try on,
the same inputs and code reuse the output; anything else, or reuse="off", runs Spark."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output
from airflow_ft_provider.model.reuse_scope import ReuseScope
from airflow_ft_provider.partitions import PartitionNotFound, Producer, RunRef
from airflow_ft_provider.partitions.provenance import Provenance
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.recovery.journal_schema import event_from_json
from airflow_ft_provider.stage_try.reuse import OutputReuse
from airflow_ft_provider.stage_try.scope import TryScope
from ft_harness.data.journal_records import stored_events
from ft_harness.data.partition_files import version_files, write_files

pytestmark = pytest.mark.s3

RUN = RunRef("etl", "manual__2026-11-25T00:00:00+00:00")
DESCRIPTION = PipelineDescription(
    "etl",
    [
        StageDeclaration("up", 1, (), (Output("orders"),)),
        StageDeclaration("down", 1, (Input("orders"),), (Output("totals"),)),
    ],
)


@dataclass(frozen=True)
class Pipeline:
    """What a try reads of its FailoverPipeline (stage_try/scope.PipelineSettings)."""

    reuse: ReuseScope = ReuseScope.WITHIN_RUN
    data_paths: dict[str, Any] = field(default_factory=dict)
    spark_conn_id: str = "spark_default"
    pipelined_in_engine: bool = True
    checkpoint_configs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Stage:
    application: str
    task_id: str = "down"
    dag_id: str = "etl"
    python_callable: Any = None
    application_args: list[Any] = field(default_factory=list)
    conf: dict[str, Any] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    # what the try reads beyond what its identity hashes (stage_try/scope.AttemptedStage)
    description: PipelineDescription | None = None
    store: Any = None
    pipeline: Pipeline = field(default_factory=Pipeline)
    outputs: tuple[Output, ...] = (Output("totals"),)
    reuse: ReuseScope | None = None
    spark_conn_id: str | None = None
    log: Any = None


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str, *args: object) -> None:
        self.lines.append(message % args)

    warning = info


def try_scope(store, stage, try_number, *, scope=ReuseScope.WITHIN_RUN, log=None, run=RUN, state=None):
    """The scope of try ``try_number`` of ``stage`` (down) in ``run``, as a stage try builds it."""
    stage = replace(
        stage, description=DESCRIPTION, store=store, pipeline=Pipeline(reuse=scope), log=log or Log()
    )
    return TryScope.of(stage, run.run_id, None, try_number, state)


def decision(store, stage, try_number, *, scope=ReuseScope.WITHIN_RUN, log=None, run=RUN):
    return OutputReuse(try_scope(store, stage, try_number, scope=scope, log=log, run=run))


def commit(store, tmp_path, result, producer, provenance, version=1, run=RUN):
    files = write_files(
        tmp_path / run.run_id.replace(":", "") / f"{result}-{producer.try_number}-{version}",
        version_files(version),
    )
    return store.commit(run.parse(result), files, producer=producer, provenance=provenance)


@pytest.fixture
def first_run(store, tmp_path):
    """up committed orders; down's try 1 committed totals with the lineage it read them with."""
    app = tmp_path / "down.py"
    app.write_text("io.write('totals', io.read('orders'))\n")
    stage = Stage(str(app))
    orders = commit(store, tmp_path, "orders", Producer("up", -1, 1), Provenance("rows1:" + "0a" * 16))
    lineage = decision(store, stage, 1).lineage({"orders": orders})
    assert lineage is not None
    totals = commit(
        store, tmp_path, "totals", Producer("down", -1, 1), Provenance("rows1:" + "0b" * 16, lineage)
    )
    return stage, totals


def test_unchanged_inputs_and_code_reuse_the_output_and_say_so(store, first_run):
    stage, totals = first_run
    log = Log()
    committed = decision(store, stage, 2, log=log).try_reuse()
    assert committed is not None and committed["totals"].reused_from_try == 1
    current = store.manifest(RUN.parse("totals"))
    assert (current.producer.try_number, current.attempt_id) == (2, totals.attempt_id)
    said = "inputs identical to try 1's: output of try 1 reused, Spark not started"
    assert any(said in line for line in log.lines), log.lines
    [event] = [e for e in stored_events(RecoveryJournal(store, RUN)) if e["kind"] == "reused"]
    assert (event["task"], event["try_number"], event["reason"]) == ("down", 2, said)


def test_a_first_try_or_reuse_off_runs_spark(store, first_run):
    stage, _ = first_run
    assert decision(store, stage, 1).try_reuse() is None
    assert decision(store, stage, 2, scope=ReuseScope.OFF).try_reuse() is None
    assert store.manifest(RUN.parse("totals")).producer.try_number == 1


def test_changed_input_rows_or_changed_code_run_spark(store, first_run, tmp_path):
    stage, _ = first_run
    Path(stage.application).write_text("io.write('totals', io.read('orders').limit(1))\n")
    assert decision(store, stage, 2).try_reuse() is None  # the application changed
    Path(stage.application).write_text("io.write('totals', io.read('orders'))\n")
    assert decision(store, replace(stage, application_args=["--all"]), 2).try_reuse() is None
    commit(store, tmp_path, "orders", Producer("up", -1, 2), Provenance("rows1:" + "0c" * 16), version=2)
    assert decision(store, stage, 2).try_reuse() is None  # the producer wrote other rows
    assert store.manifest(RUN.parse("totals")).producer.try_number == 1


def test_an_input_without_a_checksum_never_reuses(store, first_run, tmp_path):
    stage, _ = first_run
    commit(store, tmp_path, "orders", Producer("up", -1, 2), Provenance())  # e.g. a column with a map
    assert decision(store, stage, 2).try_reuse() is None


def test_a_manual_restart_recomputes_the_region_it_names_and_lets_its_consumers_reuse(store, first_run):
    stage, totals = first_run
    journal = RecoveryJournal(store, RUN)
    later = totals.created_at + 1
    # restarting up's region reschedules down as a consumer: down may reuse
    journal.record(
        event_from_json({"time": later, "kind": "manual", "task": "up", "regions": [["up"], ["down"]]})
    )
    assert decision(store, stage, 2).try_reuse() is not None
    # restarting down's own region asks for down to be computed again
    journal.record(
        event_from_json({"time": later + 1, "kind": "manual", "task": "down", "regions": [["down"]]})
    )
    log = Log()
    assert decision(store, stage, 3, log=log).try_reuse() is None
    assert any("a manual restart named this region: running Spark" in line for line in log.lines)


# -- reuse="across-runs": an earlier run's output, copied into this run --------------------------------
NEXT_RUN = RunRef("etl", "manual__2026-11-26T00:00:00+00:00")


def next_run_inputs(store, tmp_path, content="0a"):
    """The next run's up committed orders: the same rows as the first run's (content "0a") or others."""
    commit(
        store, tmp_path, "orders", Producer("up", -1, 1), Provenance("rows1:" + content * 16), run=NEXT_RUN
    )


def test_across_runs_copies_an_earlier_runs_output_only_when_asked(store, first_run, tmp_path):
    stage, totals = first_run
    next_run_inputs(store, tmp_path)
    # within-run (the default): a first try of another run computes its output
    assert decision(store, stage, 1, run=NEXT_RUN).try_reuse() is None
    log = Log()
    committed = decision(store, stage, 1, run=NEXT_RUN, scope=ReuseScope.ACROSS_RUNS, log=log).try_reuse()
    assert committed is not None and committed["totals"].reused_from_run == RUN.run_id
    said = f"inputs and code identical to run {RUN.run_id}'s: its output copied, Spark not started"
    assert any(said in line for line in log.lines), log.lines
    [event] = [e for e in stored_events(RecoveryJournal(store, NEXT_RUN)) if e["kind"] == "reused"]
    assert (event["task"], event["try_number"], event["reason"]) == ("down", 1, said)
    copied = store.manifest(NEXT_RUN.parse("totals"))
    assert copied.producer == Producer("down", -1, 1) and copied.attempt_id != totals.attempt_id
    assert copied.provenance == totals.provenance and copied.row_count == totals.row_count
    assert [(f.name, f.size, f.checksum) for f in copied.files] == [
        (f.name, f.size, f.checksum) for f in totals.files
    ]
    # the copy is this run's own: releasing the first run leaves it whole
    store.delete_keys(store.list_objects(store.layout.run_prefix(RUN)))
    fetched = store.fetch(NEXT_RUN.parse("totals"), tmp_path / "read-back")
    assert sorted(Path(p).read_bytes() for p in fetched.paths) == sorted(version_files(1).values())


def test_across_runs_computes_again_when_the_application_file_or_the_input_rows_changed(
    store, first_run, tmp_path
):
    stage, _ = first_run
    across = {"run": NEXT_RUN, "scope": ReuseScope.ACROSS_RUNS}
    next_run_inputs(store, tmp_path)
    Path(stage.application).write_text("io.write('totals', io.read('orders').distinct())\n")
    assert decision(store, stage, 1, **across).try_reuse() is None  # the code identity is in the key
    Path(stage.application).write_text("io.write('totals', io.read('orders'))\n")
    next_run_inputs(store, tmp_path, content="0c")  # up read other rows this time
    assert decision(store, stage, 1, **across).try_reuse() is None
    with pytest.raises(PartitionNotFound):
        store.manifest(NEXT_RUN.parse("totals"))


def test_an_earlier_run_released_while_it_is_copied_leaves_nothing_and_spark_runs(store, first_run, tmp_path):
    stage, totals = first_run
    next_run_inputs(store, tmp_path)
    prefix = store.layout.partition_prefix(RUN.parse("totals"))
    store.delete_keys([prefix + totals.files[-1].key])  # the first run's release has begun
    assert decision(store, stage, 1, run=NEXT_RUN, scope=ReuseScope.ACROSS_RUNS).try_reuse() is None
    with pytest.raises(PartitionNotFound):
        store.manifest(NEXT_RUN.parse("totals"))
    assert not store.list_objects(store.layout.partition_prefix(NEXT_RUN.parse("totals")))
