"""``scripts/dev.sh --dags DIR``: a user's own DAG folder in a local Airflow, S3 endpoint and Spark
Connect server, up until SIGTERM; its env file puts ``airflow`` and ``airflow-ft`` on PATH.

    make_events[0..1] ~~events (pipelined, pointwise)~~> clean_events[0..1] --cleaned--> totals
    (the docs' first pipeline, verbatim; clean_events[1] fails once)

The DAG file is written into the folder after the start, as a user would: the folder is used in place.
The docs' 'Try your own pipeline' steps are followed: trigger with a fault, history, partitions, show.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ft_harness.airflow.airflow_rest import AirflowRestClient

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "my_pipeline"


def readme_pipeline() -> str:
    """The pipeline docs/pipelines.md's 'Writing a pipeline' section gives a new user first, verbatim."""
    text = (REPO / "docs" / "pipelines.md").read_text().split("## Writing a pipeline", 1)[1]
    return text.split("```python\n", 1)[1].split("```", 1)[0]


def read_env_file(path: Path) -> dict[str, str]:
    """What ``source dev.env`` exports, evaluated by a shell (PATH included)."""
    shell = f"set -e; source {shlex.quote(str(path))}; env -0"
    out = subprocess.run(
        ["bash", "-c", shell],
        env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")},
        capture_output=True,
        timeout=30,
        check=True,
    ).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


def test_dev_mode_runs_my_dag_folder_until_sigterm(tmp_path, s3_endpoint):
    dags = tmp_path / "my-dags"
    dags.mkdir()
    env = {
        **os.environ,
        "FT_DEMO_S3_ENDPOINT": s3_endpoint.url,
        "FT_DEMO_S3_ACCESS_KEY": s3_endpoint.access_key,
        "FT_DEMO_S3_SECRET_KEY": s3_endpoint.secret_key,
        "FT_DEMO_S3_REGION": s3_endpoint.region,
    }
    process = subprocess.Popen(
        [sys.executable, str(REPO / "demo" / "dev.py"), "--dags", str(dags)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 600
        while not any(line.startswith("READY ") for line in lines):
            assert process.poll() is None and time.monotonic() < deadline, "".join(lines)[-5000:]
            time.sleep(1)
        _, base_url, env_file = next(line for line in lines if line.startswith("READY ")).split()
        home = Path(env_file).parent
        assert Path(env_file).name == "dev.env"

        dag_file = readme_pipeline()
        (dags / "my_pipeline.py").write_text(dag_file)  # after the start: the folder is watched in place
        client = AirflowRestClient(base_url, "admin", "admin")
        deadline = time.monotonic() + 120
        while DAG_ID not in {d["dag_id"] for d in client.list_dags()}:
            assert time.monotonic() < deadline, client.import_errors()
            time.sleep(2)
        client.trigger_dag_run(
            DAG_ID, {"ft_faults": [{"task": "clean_events[1]", "times": 1}]}, run_id="mine__1"
        )
        run = client.wait_for_dag_run(DAG_ID, "mine__1", timeout=600)
        assert run["state"] == "success", "".join(lines)[-5000:]
        tries = {
            (t["task_id"], t["map_index"]): t["try_number"] for t in client.task_instances(DAG_ID, "mine__1")
        }
        assert tries == {
            ("make_events", 0): 1,
            ("make_events", 1): 2,
            ("clean_events", 0): 1,
            ("clean_events", 1): 2,
            ("totals", -1): 1,
        }

        # Another terminal: `source dev.env`, then airflow-ft from PATH, aimed at this Airflow and store.
        shell_env = read_env_file(Path(env_file))
        assert shutil_which("airflow-ft", shell_env["PATH"]) == str(
            Path(sys.executable).with_name("airflow-ft")
        )
        history = subprocess.run(
            ["airflow-ft", "history", "--dag-id", DAG_ID, "--run-id", "mine__1"],
            env=shell_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert history.returncode == 0, history.stderr
        [event] = [json.loads(line) for line in history.stdout.splitlines()]
        assert event["task"] == "clean_events[1]" and event["time"].endswith("+00:00")
        assert {"clean_events[1]", "make_events[1]"} <= set(event["tasks"]) and "make_events[0]" not in event[
            "tasks"
        ]

        def airflow_ft(*argv: str) -> list[dict]:
            done = subprocess.run(
                ["airflow-ft", *argv, "--dag-id", DAG_ID, "--run-id", "mine__1"],
                env=shell_env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            return [json.loads(line) for line in done.stdout.splitlines()]

        # airflow's JSON output is JSON: no "Plugin 'ft_failover' already registered" line before it
        plugins = subprocess.run(
            ["airflow", "plugins", "-o", "json"], env=shell_env, capture_output=True, text=True, timeout=120
        )
        assert plugins.returncode == 0, plugins.stderr
        assert "ft_failover" in {plugin["name"] for plugin in json.loads(plugins.stdout)}, plugins.stdout[
            :500
        ]

        states = {p["partition"]: p["state"] for p in airflow_ft("partitions")}
        # cleaned[0] is 'reused' if it was committed before clean_events[1] failed, else 'committed'
        assert states.pop("cleaned[0]") in {"committed", "reused"}
        assert states == {
            "events[0]": "pipelined",
            "events[1]": "pipelined",
            "cleaned[1]": "committed",  # by try 2: clean_events[1] failed before its first commit
            "totals": "committed",
        }
        expected = sum(1 for event in range(1000) if event % 100 >= 10)
        assert airflow_ft("show", "totals") == [{"events": expected}]

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=180) == 0, "".join(lines)[-5000:]
        reader.join(timeout=10)
        assert "Stopping" in "".join(lines)
        assert not home.exists()  # a temporary home is removed
        assert (dags / "my_pipeline.py").read_text() == dag_file  # the user's folder is left as it was
        assert sorted(p.name for p in dags.iterdir() if p.name != "__pycache__") == ["my_pipeline.py"]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def shutil_which(name: str, path: str) -> str | None:
    import shutil

    return shutil.which(name, path=path)
