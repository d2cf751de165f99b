"""The type check starts in the background as soon as collection ends, when a selected test uses it.

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
_background: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    if any("mypy_result" in getattr(item, "fixturenames", ()) for item in session.items):
        handle, name = tempfile.mkstemp(prefix="ft-mypy-", suffix=".log")
        with open(handle, "wb") as out:
            _background["mypy"] = (
                subprocess.Popen(MYPY, cwd=REPO, stdout=out, stderr=subprocess.STDOUT),
                Path(name),
            )


def pytest_sessionfinish(session: pytest.Session) -> None:
    for process, output in _background.values():
        if process.poll() is None:
            process.kill()
            process.wait()
        output.unlink(missing_ok=True)


@pytest.fixture
def mypy_result() -> tuple[int, str]:
    """mypy's exit code and output for the package (started when collection ended)."""
    process, output = _background["mypy"]
    returncode = process.wait(timeout=600)
    return returncode, output.read_text(errors="replace")
