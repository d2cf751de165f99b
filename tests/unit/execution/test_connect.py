"""ConnectBackend against a real Spark Connect server: a try's session is handed on reset when its
work ended and released otherwise, on_kill interrupts, a new try stops what a dead one left running."""

from __future__ import annotations

import json
import socket
import threading
import time
from types import SimpleNamespace

import pytest

from airflow_ft_provider.execution.connect import ConnectBackend, drop_views, server_identity
from airflow_ft_provider.execution.connect_sessions import SESSION_KEY
from airflow_ft_provider.execution.contracts import WrittenOutput
from airflow_ft_provider.spark.spec import OutputSpec, StageSpec

pytestmark = pytest.mark.spark


class Log:
    def __init__(self):
        self.lines = []

    def info(self, message, *args):
        self.lines.append(message % args)

    warning = info


DEAD_TRY = """
import json, sys
from pyspark.sql.connect.session import SparkSession
from airflow_ft_provider.execution.connect_sessions import TrySession, with_session_id
mine = TrySession.new(sys.argv[2], 1)  # as ConnectBackend does: the connection's URL, its server
spark = SparkSession.builder.remote(with_session_id(sys.argv[1], mine.session_id)).create()
print(json.dumps(mine.to_json()), flush=True)
spark.range(0, 10**13).selectExpr("sum(id % 7)").collect()
"""


class StateStore(dict):
    """Airflow's task_state_store, as a try sees it: a key-value store shared by all tries of a task."""

    def set(self, key, value):
        self[key] = value

    def delete(self, key):
        self.pop(key, None)


@pytest.fixture
def connection(spark_connect, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_FT_CONNECT_TEST", json.dumps({**spark_connect.connection(), "login": "etl"})
    )
    return "ft_connect_test"


def stage(python_callable, **overrides):
    fields = {
        "task_id": "probe",
        "conf": {},
        "env_vars": {},
        "application": None,
        "application_args": [],
        "python_callable": python_callable,
        "spark_submit_kwargs": {},
    }
    return SimpleNamespace(**{**fields, **overrides})


def spec(**outputs):
    return StageSpec(pipeline="p", run_id="r", stage="probe", map_index=None, try_number=1, outputs=outputs)


def test_the_handle_names_the_server_without_credentials(spark_connect, monkeypatch):
    # A token makes the client insist on TLS, which the test server does not speak: never opened here.
    conn = {**spark_connect.connection(), "login": "etl", "password": "s3cret-token"}
    monkeypatch.setenv("AIRFLOW_CONN_FT_CONNECT_TOKEN", json.dumps(conn))
    backend = ConnectBackend(stage(print), conn_id="ft_connect_token", log=Log())
    assert backend.server == server_identity(backend.url) == spark_connect.url
    assert "s3cret-token" in backend.url and "s3cret-token" not in backend.server


def test_session_settings_apply_and_server_settings_are_named_not_applied(connection):
    seen = {}

    def probe(spark, io):
        seen["partitions"] = spark.conf.get("spark.sql.shuffle.partitions")

    log = Log()
    backend = ConnectBackend(
        stage(probe, conf={"spark.sql.shuffle.partitions": "3", "spark.driver.memory": "1g"}),
        conn_id=connection,
        log=log,
    )
    with backend:
        backend.run(spec())
    assert seen == {"partitions": "3"}
    assert any("spark.driver.memory are settings of the server" in line for line in log.lines), log.lines
    assert backend.session is None  # the try's session ends with it


def test_a_failing_callable_still_stops_its_session(connection):
    def broken(spark, io):
        spark.range(3).count()
        raise ValueError("boom")

    backend = ConnectBackend(stage(broken), conn_id=connection, log=Log())
    with pytest.raises(ValueError, match="boom"), backend:
        backend.run(spec())
    assert backend.session is None


def test_rows_come_from_the_outputs_written_and_a_missing_output_is_named(connection, tmp_path):
    def write_two(spark, io):
        io.write("kept", spark.range(7))
        io.write("files", spark.range(5).selectExpr("id", "id * 2 AS double"))

    outputs = {
        "kept": OutputSpec("kept", "pipelined", "view:ft_test_rows_kept"),
        "files": OutputSpec("files", "blocking", (tmp_path / "files").as_uri()),
        "forgotten": OutputSpec("forgotten", "pipelined", "view:ft_test_rows_forgotten"),
    }
    backend = ConnectBackend(stage(write_two), conn_id=connection, log=Log())
    with backend:
        backend.run(spec(**outputs))
        assert backend.written(outputs["kept"]) == WrittenOutput(7, None)  # a view: no row checksum
        files = backend.written(outputs["files"])
        assert files.rows == 5 and files.content is not None and files.content.startswith("rows1:")
        assert backend.held_rows("ft_test_rows_kept") == 7
        backend.drop("ft_test_rows_kept")
        assert backend.held_rows("ft_test_rows_kept") is None
        with pytest.raises(RuntimeError, match="without writing declared output 'forgotten'"):
            backend.written(outputs["forgotten"])


def test_a_consumer_refuses_a_view_whose_rows_changed_since_it_was_published(connection, spark_connect):
    # The producer published 7 rows as a view; the view is then replaced under its name with 8 (what a
    # recomputation from changed inputs would also do): the consumer's check names it corrupt.
    from airflow_ft_provider.execution.engine_views import check_engine_view
    from airflow_ft_provider.partitions import PartitionNotFound, Producer, RunRef
    from airflow_ft_provider.partitions.pipelined_handle import EngineLocation, PipelinedHandle

    def write_seven(spark, io):
        io.write("kept", spark.range(7))

    output = OutputSpec("kept", "pipelined", "view:ft_test_rows_checked")
    ref = RunRef("p", "r").parse("kept")
    engine = EngineLocation(spark_connect.url, "ft_test_rows_checked")
    handle = PipelinedHandle("kept", "e1", Producer("probe"), 0.0, engine, rows=7)
    backend = ConnectBackend(stage(write_seven), conn_id=connection, log=Log())
    with backend:
        backend.run(spec(kept=output))
        check_engine_view(ref, handle, backend, consumer="join")  # as published
        backend.open().range(8).createOrReplaceGlobalTempView("ft_test_rows_checked")
        with pytest.raises(PartitionNotFound, match="checksum mismatch.*has 8 rows, 7 when it was published"):
            check_engine_view(ref, handle, backend, consumer="join")
        backend.drop("ft_test_rows_checked")
        with pytest.raises(PartitionNotFound, match="no longer holds view ft_test_rows_checked"):
            check_engine_view(ref, handle, backend, consumer="join")


def test_kill_interrupts_the_running_query_and_stops_the_session(connection, spark_connect):
    started = threading.Event()
    outcome = {}

    def endless(spark, io):
        started.set()
        spark.range(0, 10**13).selectExpr("sum(id * id)").collect()  # hours on two cores

    backend = ConnectBackend(stage(endless), conn_id=connection, log=Log())

    def run():
        try:
            with backend:
                backend.run(spec())
            outcome["result"] = "finished"
        except Exception as err:  # noqa: BLE001 (what the interrupted query raises is the point)
            outcome["result"] = err

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(60)
    time.sleep(3)  # the query is on the server now
    killed_at = time.monotonic()
    backend.kill()
    worker.join(120)
    assert not worker.is_alive()
    assert isinstance(outcome["result"], Exception), outcome
    assert time.monotonic() - killed_at < 60
    assert backend.session is None
    # The server itself is fine: another session runs a query.
    from pyspark.sql.connect.session import SparkSession

    other = SparkSession.builder.remote(spark_connect.url).create()
    try:
        assert other.range(5).count() == 5
    finally:
        other.stop()


class WarnLog(Log):
    def warning(self, message, *args):
        self.lines.append(message % args)


def test_views_of_an_ended_run_are_dropped_from_their_server_only(connection, spark_connect):
    from pyspark.sql.connect.session import SparkSession

    from airflow_ft_provider.partitions.pipelined_handle import EngineLocation

    session = SparkSession.builder.remote(spark_connect.url).create()
    try:
        session.range(3).cache().createOrReplaceGlobalTempView("ft_run_end_probe")
        held = EngineLocation(spark_connect.url, "ft_run_end_probe")
        gone = EngineLocation(spark_connect.url, "ft_run_end_already_dropped")
        elsewhere = EngineLocation("sc://10.0.0.9:15002", "ft_run_end_probe")
        log = WarnLog()
        assert drop_views(connection, [held, gone, elsewhere], log) == ["ft_run_end_probe"]
        assert not session.catalog.tableExists("global_temp.ft_run_end_probe")
        assert any(
            "sc://10.0.0.9:15002/ft_run_end_probe" in line and "not released" in line for line in log.lines
        )
    finally:
        session.stop()


def test_a_server_that_does_not_answer_took_its_views_with_it(monkeypatch):
    from airflow_ft_provider.partitions.pipelined_handle import EngineLocation

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(
        "AIRFLOW_CONN_FT_CONNECT_GONE",
        json.dumps({"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": port}),
    )
    log = WarnLog()
    assert drop_views("ft_connect_gone", [EngineLocation(f"sc://127.0.0.1:{port}", "ft_v")], log) == []
    assert any("does not answer" in line and "ft_v" in line for line in log.lines)


def test_a_new_try_interrupts_what_a_dead_try_left_running_in_its_session(connection, spark_connect):
    # Try 1 runs in a process of its own, records its session, starts a long query and is SIGKILLed
    # (its worker died): the query goes on in the server. Try 2 finds try 1's session in the task's
    # state store, joins it and interrupts the query before opening its own session.
    import subprocess
    import sys

    from airflow_ft_provider.execution.connect_sessions import SESSION_KEY, TrySession

    url = ConnectBackend(stage(print), conn_id=connection, log=Log()).url  # user etl, as every try
    worker = subprocess.Popen(
        [sys.executable, "-c", DEAD_TRY, url, server_identity(url)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        state = StateStore({SESSION_KEY: json.loads(worker.stdout.readline())})
        time.sleep(4)  # the query is running in the server
    finally:
        worker.kill()
        worker.wait()
    log = Log()
    with ConnectBackend(stage(print), conn_id=connection, log=log, state=state, try_number=2) as retry:
        told = "interrupted 1 operations that try 1 left running"
        assert any(told in line for line in log.lines), log.lines
        record = TrySession.from_json(state[SESSION_KEY])
        assert record.try_number == 2 and retry.session.range(3).count() == 3
    # a third try finds try 2's session released (closed with its try): nothing to interrupt
    log = Log()
    with ConnectBackend(stage(print), conn_id=connection, log=log, state=state, try_number=3):
        pass
    assert not any("interrupted" in line for line in log.lines), log.lines


def test_a_try_that_ended_hands_its_session_on_as_it_found_it_and_a_failed_one_does_not(connection):
    #   try A (sets conf, makes a temp view) -> try B: the same session, neither left in it
    #   -> try C fails -> try D: a session of its own
    seen = []

    def leaves_things(spark, io):
        spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
        spark.range(3).createOrReplaceTempView("ft_leftover")
        seen.append((spark.session_id, spark.conf.get("spark.sql.shuffle.partitions")))

    def looks(spark, io):
        tables = [t.name for t in spark.catalog.listTables() if t.isTemporary]
        seen.append((spark.session_id, spark.conf.get("spark.sql.session.timeZone"), tables))

    def fails(spark, io):
        seen.append((spark.session_id,))
        raise ValueError("boom")

    state = StateStore()
    with ConnectBackend(
        stage(leaves_things, conf={"spark.sql.shuffle.partitions": "3"}),
        conn_id=connection,
        log=Log(),
        state=state,
    ) as first:
        first.run(spec())
        assert SESSION_KEY in state  # recorded while it works ...
    assert SESSION_KEY not in state  # ... and forgotten once it ended: nothing of it runs on
    with ConnectBackend(stage(looks), conn_id=connection, log=Log()) as second:
        second.run(spec())
    with (
        pytest.raises(ValueError, match="boom"),
        ConnectBackend(stage(fails), conn_id=connection, log=Log()) as third,
    ):
        third.run(spec())
    with ConnectBackend(stage(looks), conn_id=connection, log=Log()) as fourth:
        fourth.run(spec())
    (a, partitions), (b, zone, tables), (c,), (d, _, _) = seen
    assert partitions == "3" and a == b == c and d != c
    assert zone != "Asia/Tokyo" and "ft_leftover" not in tables


def test_tries_at_once_work_in_sessions_of_their_own_and_a_closed_one_is_replaced(connection, spark_connect):
    from pyspark.sql.connect.session import SparkSession

    with ConnectBackend(stage(print), conn_id=connection, log=Log()) as one:
        with ConnectBackend(stage(print), conn_id=connection, log=Log()) as two:
            assert one.session.session_id != two.session.session_id
        handed_on = one.session.session_id
    # The server closes the slot's session (as its idle timeout would): the next try opens a new one
    from airflow_ft_provider.execution.connect_sessions import with_session_id

    closer = SparkSession.builder.remote(with_session_id(one.url, handed_on)).create()  # user etl too
    closer.stop()
    log = Log()
    with ConnectBackend(stage(print), conn_id=connection, log=log) as after:
        assert after.session.session_id != handed_on and after.session.range(2).count() == 2
    assert any("closed slot" in line for line in log.lines), log.lines


def test_an_application_that_stops_its_session_still_hands_it_on(connection, tmp_path):
    #   try A runs a file written for spark-submit (it ends with spark.stop()) -> try B: A's session,
    #   whose Python workers are warm; A's conf change not in it
    app = tmp_path / "stops.py"
    app.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "spark.conf.set('spark.sql.session.timeZone', 'Asia/Tokyo')\n"
        "print('ran in', spark.session_id)\n"
        "spark.stop()\n"
    )
    with ConnectBackend(stage(None, application=str(app)), conn_id=connection, log=Log()) as first:
        first.run(spec())
        ran_in = first.session.session_id  # open() again after the application's stop(): the same session
    seen = []

    def looks(spark, io):
        seen.append((spark.session_id, spark.conf.get("spark.sql.session.timeZone")))

    with ConnectBackend(stage(looks), conn_id=connection, log=Log()) as second:
        second.run(spec())
    [(handed_on, zone)] = seen
    assert handed_on == ran_in and zone != "Asia/Tokyo"
