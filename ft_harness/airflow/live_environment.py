"""What a live Airflow runs with: its components' environment (test-friendly settings), its home (users,
DAG folder) and the bootstrap that migrates the database before the components start; and
``pipeline_environment``, what pipeline DAGs need in every component (the S3 endpoint as
``aws_default``, Spark, the partition store)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

REPO_ROOT = Path(__file__).resolve().parents[2]
MARKER_ENV = "FT_LIVE_AIRFLOW_INSTANCE"
# [scheduler] task_instance_heartbeat_timeout: how soon a lost worker is noticed. Not lower: a task
# whose heartbeats stall that long on a saturated 2-core machine is declared dead while it works.
HEARTBEAT_TIMEOUT_S = 30


class LiveInstance(Protocol):
    """What the environment and the home are made from: a ``LiveAirflow``'s settings."""

    home: Path
    dags_folder: Path
    dag_sources: Sequence[Path]
    scratch: Path
    log_dir: Path
    task_log_dir: Path
    extra_env: Mapping[str, str]
    instance_id: str
    base_url: str
    port: int
    api_conn_port: int | None
    database_url: str
    username: str
    password: str
    viewer_username: str
    viewer_password: str
    service_username: str
    service_password: str


class LiveAirflowError(RuntimeError):
    """Airflow did not start (or died); the message carries log paths and tails."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BOOTSTRAP = """
import os, sqlite3
url = os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
if url.startswith("sqlite:///"):
    # WAL journal (persistent in the file): concurrent readers (API polling) never block the writers
    # (scheduler, execution API), which otherwise hit "database is locked" on a busy machine.
    with sqlite3.connect(url[len("sqlite:///"):]) as c:
        print(">>> journal_mode", c.execute("PRAGMA journal_mode=WAL").fetchone()[0], flush=True)
from airflow.configuration import write_default_airflow_configuration_if_needed
write_default_airflow_configuration_if_needed()
from airflow.cli import cli_parser
parser = cli_parser.get_parser()
for argv in (["db", "migrate"], ["dags", "reserialize"]):
    print(">>> airflow", *argv, flush=True)
    args = parser.parse_args(argv)
    args.func(args)
print(">>> bootstrap done", flush=True)
"""


def component_environment(af: LiveInstance) -> dict[str, str]:
    """The full environment every component of ``af`` runs with: the test-friendly settings, then
    ``af.extra_env``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith(("AIRFLOW__", "AIRFLOW_CONN_")) or k == "AIRFLOW_HOME")
    }
    pythonpath = [str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    conn = {
        "conn_type": "http",
        "host": "127.0.0.1",
        "port": af.api_conn_port or af.port,
        "schema": "http",
        "login": af.service_username,
        "password": af.service_password,
    }
    env.update(
        {
            MARKER_ENV: af.instance_id,
            "FT_LIVE_AIRFLOW_SCRATCH": str(af.scratch),
            "FT_LIVE_AIRFLOW_URL": af.base_url,
            "PYTHONPATH": os.pathsep.join(pythonpath),
            "PYTHONUNBUFFERED": "1",
            "AIRFLOW_HOME": str(af.home),
            "AIRFLOW_CONN_AIRFLOW_API": json.dumps(conn),
            # -- core / executor
            "AIRFLOW__CORE__DAGS_FOLDER": str(af.dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            # Tasks at once: each is a Python process importing Airflow (and PySpark, on Spark
            # Connect); more than 8 on 2 cores only thrashes.
            "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{af.base_url}/execution/",
            # The scenarios, the demo, chaos and benchmarks inject faults through a run's ft_faults.
            "AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION": "True",
            # Airflow's defaults otherwise ([core] lazy_load_plugins = True): task processes fork
            # from executor workers that already hold the Spark Connect client all the same.
            "AIRFLOW__FT_PROVIDER__PRELOAD_STAGE_CLIENTS": "True",
            # SQLite: in WAL mode (set by the bootstrap), default 5 s busy timeout. A longer timeout
            # makes things worse: under load the API server can stall on the DB lock until the
            # timeout expires (thread pool exhausted by requests waiting for the lock), and a 30 s
            # stall fails the scheduler's heartbeat and re-runs tasks.
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": af.database_url,
            # -- auth: a known admin user (SimpleAuthManager reads passwords from this file)
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": (
                f"{af.username}:admin,{af.viewer_username}:viewer,{af.service_username}:user"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(af.home / "passwords.json"),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
            # -- API server
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(af.port),
            "AIRFLOW__API__BASE_URL": f"{af.base_url}/",
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__EXPOSE_CONFIG": "True",
            "AIRFLOW__API__EXPOSE_STACKTRACE": "True",  # 500 responses say what broke
            # -- log servers (defaults 8793/8794 would clash between concurrent instances)
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            # -- fast DAG folder scanning: new files are found within 5 s and parsed at once;
            #    known files are re-parsed every 10 min (no test edits one; DAG callbacks jump the
            #    queue): re-parsing every DAG file each 30 s cost ~150 CPU-s a suite run
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
            "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__PRINT_STATS_INTERVAL": "300",
            # -- bounded detection of dead task processes / lost workers
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_S),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
            # (task heartbeats every 5 s, the default: more often only adds DB write load)
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "30",
            # The one scheduler must never declare itself dead: when a burst of task starts starves
            # its loop past the 30 s default, it marks its own job failed, "adopts" and resets every
            # running task, and its LocalExecutor can hang on shutdown (seen under a 32-task burst).
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "300",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
        }
    )
    env.update(af.extra_env)
    return env


def prepare_home(af: LiveInstance) -> None:
    """The home's folders, the users' passwords file, and the DAG sources copied into the DAGs folder."""
    for d in (af.dags_folder, af.scratch, af.log_dir, af.task_log_dir):
        d.mkdir(parents=True, exist_ok=True)
    (af.home / "passwords.json").write_text(
        json.dumps(
            {
                af.username: af.password,
                af.viewer_username: af.viewer_password,
                af.service_username: af.service_password,
            }
        )
        + "\n"
    )
    placed: dict[str, Path] = {}
    for src in af.dag_sources:
        if not src.exists():
            raise LiveAirflowError(f"DAG source {src} does not exist")
        children = sorted(src.iterdir()) if src.is_dir() else [src]
        for child in children:
            hidden = child.name == "__pycache__" or child.name.startswith(".")
            if hidden and child.name != ".airflowignore":
                continue
            if child.name in placed:
                raise LiveAirflowError(f"{child} clashes with {placed[child.name]} in the dags folder")
            placed[child.name] = child
            dst = af.dags_folder / child.name
            if child.is_dir():
                shutil.copytree(child, dst, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(child, dst)


def pipeline_environment(s3_endpoint, store_url: str, spark_connect=None) -> dict[str, str]:
    """What pipeline DAGs need in every component: ``aws_default`` on the S3 endpoint, Spark as
    ``spark_default`` -- the given Spark Connect server, else local ``spark-submit`` -- and local
    ``spark-submit`` as ``spark_submit`` too, the partition store URL and the Spark environment of
    this virtualenv."""
    from ft_harness.services.spark_env import spark_environment

    spark = spark_environment()
    submit = json.dumps({"conn_type": "spark", "host": "local[1]"})
    return {
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(
            {
                "conn_type": "aws",
                "login": s3_endpoint.access_key,
                "password": s3_endpoint.secret_key,
                "extra": {"endpoint_url": s3_endpoint.url, "region_name": s3_endpoint.region},
            }
        ),
        "AIRFLOW_CONN_SPARK_DEFAULT": submit
        if spark_connect is None
        else json.dumps(spark_connect.connection()),
        "AIRFLOW_CONN_SPARK_SUBMIT": submit,
        "AIRFLOW__FT_PROVIDER__PARTITION_STORE_URL": store_url,
        "FT_E2E_APPS": str(REPO_ROOT / "tests" / "e2e" / "apps"),
        **{
            k: spark[k]
            for k in (
                "PATH",
                "SPARK_HOME",
                "PYSPARK_PYTHON",
                "PYSPARK_DRIVER_PYTHON",
                "SPARK_LOCAL_IP",
                "SPARK_SUBMIT_OPTS",
            )
        },
    }
