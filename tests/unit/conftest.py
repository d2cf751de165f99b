"""The type check starts in the background as soon as collection ends, when its test is selected.

mypy takes ~20 s of one core. Run at its turn, near the end of the low-priority session, it left the
other core idle once the live-Airflow session had finished; started early, it uses time the other
tests leave idle, and its test only collects the result.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MYPY = [sys.executable, "-m", "mypy", "airflow_ft_provider", "--cache-dir", "/dev/null"]
MYPY_TEST = "test_mypy_finds_no_type_errors_in_the_package"
_background: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.name == MYPY_TEST for item in session.items):
        handle, name = tempfile.mkstemp(prefix="ft-mypy-", suffix=".log")
        with open(handle, "wb") as out:
            _background["mypy"] = (subprocess.Popen(MYPY, cwd=REPO, stdout=out, stderr=subprocess.STDOUT), Path(name))


def pytest_sessionfinish(session: pytest.Session) -> None:
    for process, output in _background.values():
        if process.poll() is None:
            process.kill()
            process.wait()
        output.unlink(missing_ok=True)


@pytest.fixture
def mypy_result() -> tuple[int, str]:
    """mypy's exit code and output for the package (started at collection; run now if it was not)."""
    if "mypy" not in _background:
        done = subprocess.run(MYPY, cwd=REPO, capture_output=True, text=True, timeout=600)
        return done.returncode, done.stdout + done.stderr
    process, output = _background["mypy"]
    returncode = process.wait(timeout=600)
    return returncode, output.read_text(errors="replace")
