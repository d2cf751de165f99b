"""A try killed between its Spark work and its commit: the next try commits that output itself
(stage_try/adoption.py), against the S3 endpoint, with a real scratch directory and its lock."""

from __future__ import annotations

import socket

import pytest

from airflow_ft_provider.execution.contracts import WrittenOutput
from airflow_ft_provider.execution.finished_work import FINISHED_KEY, FinishedWork
from airflow_ft_provider.execution.workdir import OWNER_FILE
from airflow_ft_provider.partitions import PartitionNotFound, Producer
from airflow_ft_provider.partitions.provenance import Provenance
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.stage_try.adoption import FinishedWorkAdoption
from airflow_ft_provider.stage_try.reuse import OutputReuse
from ft_harness.data.journal_records import stored_events
from ft_harness.data.partition_files import read_all, version_files, write_files
from tests.unit.stage_try.test_reuse_decision import RUN, Log, Stage, try_scope

pytestmark = pytest.mark.s3

CONTENT = "rows1:" + "0d" * 16


class StateStore:
    def __init__(self) -> None:
        self.values: dict[str, object] = {}

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value

    def delete(self, key):
        self.values.pop(key, None)


def adoption(store, state, try_number, tmp_path, log=None):
    scope = try_scope(store, Stage(str(tmp_path / "down.py")), try_number, log=log or Log(), state=state)
    return FinishedWorkAdoption(scope, OutputReuse(scope))


@pytest.fixture
def killed_try(store, tmp_path):
    """up committed orders; down's try 1 wrote totals to its scratch directory, recorded it, and was
    killed (its directory's lock is free) before committing."""
    orders_files = write_files(tmp_path / "orders", version_files(1))
    orders = store.commit(RUN.parse("orders"), orders_files, producer=Producer("up", -1, 1))
    workdir = tmp_path / "ft-stage-killed"
    out = write_files(workdir / "out" / "totals", version_files(7))
    (workdir / OWNER_FILE).write_text("")
    state = StateStore()
    adoption(store, state, 1, tmp_path).record(
        {"totals": (out.as_uri(), None)},
        {"totals": WrittenOutput(21, CONTENT)},
        {"orders": orders},
        None,
        workdir,
    )
    return state, workdir


def test_the_next_try_commits_the_killed_trys_output_without_spark(store, killed_try, tmp_path):
    state, workdir = killed_try
    assert FinishedWork.from_json(state.values[FINISHED_KEY]).try_number == 1
    log = Log()
    committed = adoption(store, state, 2, tmp_path, log).try_adopt()
    assert committed is not None and committed["totals"].adopted_from_try == 1
    manifest = store.manifest(RUN.parse("totals"))
    assert (manifest.producer.try_number, manifest.row_count) == (2, 21)
    assert manifest.provenance == Provenance(CONTENT, None)
    assert read_all(store.fetch(RUN.parse("totals"), tmp_path / "in").paths) == version_files(7)
    assert not workdir.exists() and FINISHED_KEY not in state.values
    said = (
        "try 1 finished its Spark work and was killed before its commit: output committed, Spark not started"
    )
    assert any(said in line for line in log.lines), log.lines
    assert [e["kind"] for e in stored_events(RecoveryJournal(store, RUN))] == ["adopted"]


def test_changed_inputs_another_host_or_a_live_owner_mean_running_spark(store, killed_try, tmp_path):
    state, workdir = killed_try
    record = state.values[FINISHED_KEY]
    state.values[FINISHED_KEY] = {**record, "host": socket.gethostname() + "-elsewhere"}
    assert adoption(store, state, 2, tmp_path).try_adopt() is None
    state.values[FINISHED_KEY] = record
    store.commit(
        RUN.parse("orders"), write_files(tmp_path / "o2", version_files(2)), producer=Producer("up", -1, 2)
    )
    assert adoption(store, state, 2, tmp_path).try_adopt() is None  # up re-ran: other input attempts
    assert workdir.exists()
    with pytest.raises(PartitionNotFound):
        store.manifest(RUN.parse("totals"))  # nothing was committed


def test_a_first_try_reads_no_records(store, tmp_path):
    # No earlier try can have left work behind: the first try asks the task state store nothing (each
    # read is a request to the API server, on every stage's first try).
    class Counting(StateStore):
        reads = 0

        def get(self, key, default=None):
            Counting.reads += 1
            return super().get(key, default)

    state = Counting()
    assert adoption(store, state, 1, tmp_path).try_adopt() is None
    assert Counting.reads == 0
    assert adoption(store, state, 2, tmp_path).try_adopt() is None
    assert Counting.reads == 2  # a later try looks for finished, then running work
