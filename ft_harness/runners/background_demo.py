"""The demo test's demo, started in the background when the session begins (pytest plugin).

The demo is a whole pipeline run twice in its own Airflow (~5 minutes, mostly waiting). Started at the
first test of a session that includes tests/demo, it runs while the other tests do; its test is moved
to the end of the session and only waits for it and checks the report.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO_TESTS = "tests/demo/"


@dataclass
class BackgroundDemo:
    process: subprocess.Popen
    home: Path
    output: Path

    def result(self, timeout: float = 1800) -> tuple[int, str]:
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        return self.process.returncode, self.output.read_text(errors="replace")


def pytest_collection_modifyitems(session, config, items) -> None:
    items.sort(key=lambda item: item.nodeid.startswith(DEMO_TESTS))  # stable: the demo test goes last


@pytest.fixture(scope="session", autouse=True)
def background_demo(request, tmp_path_factory) -> BackgroundDemo | None:
    if not any(item.nodeid.startswith(DEMO_TESTS) for item in request.session.items):
        yield None
        return
    s3_endpoint = request.getfixturevalue("s3_endpoint")
    folder = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "FT_DEMO_S3_ENDPOINT": s3_endpoint.url,
            "FT_DEMO_S3_ACCESS_KEY": s3_endpoint.access_key,
            "FT_DEMO_S3_SECRET_KEY": s3_endpoint.secret_key,
            "FT_DEMO_S3_REGION": s3_endpoint.region,
        }
    )
    output = folder / "demo-output.txt"
    with open(output, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "demo/run_demo.py", "--no-wait", "--airflow-home", str(folder / "airflow-home")],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    demo = BackgroundDemo(process, folder / "airflow-home", output)
    yield demo
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
