"""A try killed while its Spark Connect server was still writing its output: the next try waits for
that write and commits it (stage_try/adoption.py), against a real Connect server and the S3 endpoint.

The killed try is a separate process that records its work as a stage try does, starts a write whose
rows each take a while in a Python UDF (which notes every row it computes in a file), and is SIGKILLed
mid-write. That file shows how often each row was computed: once means one computation, not two.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from airflow_ft_provider.execution.connect import ConnectBackend, server_identity
from airflow_ft_provider.execution.connect_sessions import SESSION_KEY, TrySession
from airflow_ft_provider.execution.running_work import RUNNING_KEY
from airflow_ft_provider.execution.workdir import OWNER_FILE
from airflow_ft_provider.partitions import PartitionNotFound, Producer, S3PartitionStore
from airflow_ft_provider.partitions.parquet import read_table
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.stage_try.adoption import FinishedWorkAdoption
from airflow_ft_provider.stage_try.reuse import OutputReuse
from ft_harness.data.journal_records import stored_events
from ft_harness.data.partition_files import version_files, write_files
from tests.unit.execution.test_connect import stage
from tests.unit.stage_try.test_adoption import StateStore
from tests.unit.stage_try.test_reuse_decision import RUN, Log, Stage, try_scope

pytestmark = [pytest.mark.spark, pytest.mark.s3]

ROWS = 6
KILLED_TRY = """
import sys, time
from pyspark.sql.connect.session import SparkSession
from pyspark.sql.functions import udf
from pyspark.sql.types import LongType
url, session_id, location, ledger, seconds = sys.argv[1:6]
spark = SparkSession.builder.remote(f"{url}/;session_id={session_id}").create()

@udf(LongType())
def slow(value):  # runs in the server's Python worker
    import time
    time.sleep(float(seconds))
    with open(ledger, "a") as out:
        out.write(f"{value}\\n")
    return value * value

spark.range(0, ROWS, 1, 2).select(slow("id").alias("square")).write.parquet(location)
""".replace("ROWS", str(ROWS))


@pytest.fixture
def store(s3_bucket) -> S3PartitionStore:
    return S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/")


@pytest.fixture
def connection(spark_connect, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_FT_RUNNING_TEST", json.dumps(spark_connect.connection()))
    return "ft_running_test"


def adoption(store, state, try_number, tmp_path, url, log=None):
    scope = try_scope(store, Stage(str(tmp_path / "down.py")), try_number, log=log or Log(), state=state)
    return FinishedWorkAdoption(scope, OutputReuse(scope), connect_url=lambda: url)


class KilledTry:
    """down's try 1: recorded its running work, started its write in the server, then was SIGKILLed."""

    def __init__(self, store, spark_connect, tmp_path, *, row_seconds):
        (tmp_path / "down.py").write_text("# down's application\n")
        orders = store.commit(
            RUN.parse("orders"),
            write_files(tmp_path / "orders", version_files(1)),
            producer=Producer("up", -1, 1),
        )
        self.workdir = tmp_path / "ft-stage-killed"
        self.workdir.mkdir()
        (self.workdir / OWNER_FILE).write_text("")  # its lock is free: the process holding it is dead
        self.location = (self.workdir / "out" / "totals").as_uri()
        self.ledger = tmp_path / "rows-computed"
        self.ledger.touch()
        self.session = TrySession.new(server_identity(spark_connect.url), 1)
        self.state = StateStore()
        self.state.set(SESSION_KEY, self.session.to_json())
        first = adoption(store, self.state, 1, tmp_path, spark_connect.url)
        first.record_started(
            self.session,
            {"totals": (self.location, None)},
            {"orders": orders},
            first.reuse.lineage({"orders": orders}),
            self.workdir,
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", KILLED_TRY, spark_connect.url, self.session.session_id]
            + [self.location, str(self.ledger), str(row_seconds)],
            env={**os.environ, "SPARK_CONNECT_MODE_ENABLED": "1", "SPARK_REMOTE": spark_connect.url},
            start_new_session=True,
        )

    def kill_once_computing(self, timeout=120):
        deadline = time.monotonic() + timeout
        while not self.ledger.read_text() and time.monotonic() < deadline:
            assert self.process.poll() is None, "the killed try's write ended early"
            time.sleep(0.1)
        assert self.ledger.read_text(), "the write never started"
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def rows_computed(self):
        return sorted(int(line) for line in self.ledger.read_text().split())


def test_the_next_try_waits_for_the_running_write_and_commits_it_once(store, spark_connect, tmp_path):
    killed = KilledTry(store, spark_connect, tmp_path, row_seconds=2.0)  # 3 rows per task: ~6 s
    killed.kill_once_computing()
    started = time.monotonic()
    log = Log()
    committed = adoption(store, killed.state, 2, tmp_path, spark_connect.url, log).try_adopt()
    assert committed is not None and committed["totals"].adopted_from_try == 1, log.lines
    manifest = store.manifest(RUN.parse("totals"))
    assert (manifest.producer.try_number, manifest.row_count) == (2, ROWS)
    assert killed.rows_computed() == list(range(ROWS))  # every row once: one computation
    assert any("still runs in its Spark Connect session" in line for line in log.lines), log.lines
    [said] = [line for line in log.lines if "output committed" in line]
    assert "was still running when its worker died: waited" in said, said
    assert "no second computation started" in said
    assert time.monotonic() - started < 60
    [event] = stored_events(RecoveryJournal(store, RUN))
    assert event["kind"] == "adopted" and event["try_number"] == 2
    assert not killed.workdir.exists() and RUNNING_KEY not in killed.state.values
    values = sorted(row["square"] for row in _rows(store, tmp_path))
    assert values == [i * i for i in range(ROWS)]


def test_a_write_that_completed_after_the_kill_is_committed_without_waiting(store, spark_connect, tmp_path):
    killed = KilledTry(store, spark_connect, tmp_path, row_seconds=0.3)
    killed.kill_once_computing()
    deadline = time.monotonic() + 60
    while not (killed.workdir / "out" / "totals" / "_SUCCESS").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    # the job's commit marker comes just before the operation ends in the server: on a loaded machine
    # the next try could still see it running (and say it waited); give the server time to end it
    time.sleep(3)
    log = Log()
    assert adoption(store, killed.state, 2, tmp_path, spark_connect.url, log).try_adopt() is not None
    assert any("completed after its worker died: output committed, Spark not started" in x for x in log.lines)
    assert killed.rows_computed() == list(range(ROWS))
    assert store.manifest(RUN.parse("totals")).row_count == ROWS


def test_work_that_cannot_be_adopted_is_interrupted_before_the_new_try_computes(
    store, spark_connect, connection, tmp_path
):
    killed = KilledTry(store, spark_connect, tmp_path, row_seconds=2.0)
    killed.kill_once_computing()
    # up ran again meanwhile: try 1's write reads inputs that are no longer the run's
    store.commit(
        RUN.parse("orders"), write_files(tmp_path / "o2", version_files(2)), producer=Producer("up", -1, 2)
    )
    log = Log()
    assert adoption(store, killed.state, 2, tmp_path, spark_connect.url, log).try_adopt() is None
    assert any("the inputs changed since the earlier try read them" in line for line in log.lines)
    with pytest.raises(PartitionNotFound):
        store.manifest(RUN.parse("totals"))
    # The try then opens its backend, which interrupts the earlier try's write before computing.
    backend = ConnectBackend(stage(None), conn_id=connection, log=log, state=killed.state, try_number=2)
    with backend:
        pass
    assert any("interrupted 1 operations that try 1 left running" in line for line in log.lines), log.lines
    time.sleep(5)  # longer than the rows left would take, had the write gone on
    assert not (killed.workdir / "out" / "totals" / "_SUCCESS").exists()
    assert len(killed.rows_computed()) < ROWS


def test_off_or_another_server_means_no_waiting(store, spark_connect, tmp_path):
    killed = KilledTry(store, spark_connect, tmp_path, row_seconds=0.5)
    killed.kill_once_computing()
    log = Log()
    assert adoption(store, killed.state, 2, tmp_path, None, log).try_adopt() is None  # not Connect, or off
    assert adoption(store, killed.state, 2, tmp_path, "sc://elsewhere:15002", log).try_adopt() is None
    assert any("this try does not wait for it" in line for line in log.lines), log.lines
    assert any("not this try's server and worker" in line for line in log.lines), log.lines
    assert killed.workdir.exists()  # left for a try that may adopt it, or the sweep


def _rows(store, tmp_path):
    return read_table(store, RUN.parse("totals")).to_pylist()


KILLED_EXECUTORS_TRY = """
import json, sys
from pyspark.sql.connect.session import SparkSession
from pyspark.sql.functions import udf
from pyspark.sql.types import LongType
from airflow_ft_provider.execution.submit import runtime_zip
from airflow_ft_provider.spark.partition_objects import write_objects
from airflow_ft_provider.spark.spec import StoreCredentials
url, session_id, target, ledger, seconds, options, keys, folder = sys.argv[1:9]
spark = SparkSession.builder.remote(f"{url}/;session_id={session_id}").create()
spark.addArtifacts(runtime_zip(__import__("pathlib").Path(folder)), pyfile=True)

@udf(LongType())
def slow(value):  # runs in the server's Python worker, on the Spark host
    import time
    time.sleep(float(seconds))
    with open(ledger, "a") as out:
        out.write(f"{value}\\n")
    return value * value

squares = spark.range(0, ROWS, 1, 2).select(slow("id").alias("square"))
write_objects(squares, target, json.loads(options), StoreCredentials(*json.loads(keys), None))
""".replace("ROWS", str(ROWS))


def test_the_executors_write_of_a_try_lost_on_another_worker_is_waited_for_and_committed_once(
    store, s3_bucket, remote_spark, tmp_path, monkeypatch
):
    #   orders --> down (try 1: its worker, "worker-1", is lost while the Spark host's executors write
    #   totals to S3; try 2, on this worker, waits for that write and commits the executors' record)
    from airflow_ft_provider.partitions.store import new_attempt_id
    from airflow_ft_provider.spark.partition_objects import access_options
    from airflow_ft_provider.spark.spec import StoreAccess
    from airflow_ft_provider.stage_try import adoption as adoption_module

    connect, endpoint = remote_spark.connect, s3_bucket.endpoint
    (tmp_path / "down.py").write_text("# down's application\n")
    orders = store.commit(
        RUN.parse("orders"),
        write_files(tmp_path / "orders", version_files(1)),
        producer=Producer("up", -1, 1),
    )
    workdir = tmp_path / "ft-stage-killed"
    workdir.mkdir()
    attempt = new_attempt_id(1)
    target = store.attempt_location(RUN.parse("totals"), attempt)
    ledger = f"/tmp/rows-computed-{tmp_path.name}"  # on the Spark host's own disk
    session = TrySession.new(server_identity(connect.url), 1)
    state = StateStore()
    state.set(SESSION_KEY, session.to_json())
    first = adoption(store, state, 1, tmp_path, connect.url)
    monkeypatch.setattr(adoption_module.socket, "gethostname", lambda: "worker-1")
    first.record_started(
        session,
        {"totals": (target, attempt)},
        {"orders": orders},
        first.reuse.lineage({"orders": orders}),
        workdir,
    )
    monkeypatch.undo()
    assert state.values[RUNNING_KEY]["host"] == "worker-1" and state.values[RUNNING_KEY]["attempts"]
    options = access_options(StoreAccess(endpoint=endpoint.url, region=endpoint.region))
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_EXECUTORS_TRY, connect.url, session.session_id, target, ledger, "2.0"]
        + [json.dumps(options), json.dumps([endpoint.access_key, endpoint.secret_key]), str(tmp_path)],
        env={**os.environ, "SPARK_CONNECT_MODE_ENABLED": "1", "SPARK_REMOTE": connect.url},
        start_new_session=True,
    )
    computed = remote_spark.host.path(ledger)
    deadline = time.monotonic() + 180
    while not (computed.exists() and computed.read_text()) and time.monotonic() < deadline:
        assert process.poll() is None, "the killed try's write ended early"
        time.sleep(0.1)
    assert computed.exists() and computed.read_text(), "the write never started"
    os.killpg(process.pid, signal.SIGKILL)  # worker-1 is lost; the Spark host goes on writing
    process.wait()

    log = Log()
    committed = adoption(store, state, 2, tmp_path, connect.url, log).try_adopt()
    assert committed is not None and committed["totals"].adopted_from_try == 1, log.lines
    [said] = [line for line in log.lines if "output committed" in line]
    assert "was still running when its worker died: waited" in said, log.lines
    manifest = store.manifest(RUN.parse("totals"))
    assert (manifest.producer.try_number, manifest.row_count, manifest.attempt_id) == (2, ROWS, attempt)
    assert sorted(int(v) for v in computed.read_text().split()) == list(range(ROWS))  # one computation
    assert sorted(row["square"] for row in _rows(store, tmp_path)) == [i * i for i in range(ROWS)]
    assert RUNNING_KEY not in state.values
