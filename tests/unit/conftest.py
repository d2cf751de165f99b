"""Fixtures of the unit tests: the partition store on a fresh bucket of the S3 test endpoint, and the
type check in the background.

The type check starts as soon as collection ends, when a selected test uses it. mypy takes ~20 s of
one core. Run at its turn, near the end of the low-priority session, it left the other core idle once
the live-Airflow session had finished; started early, it uses time the other tests leave idle, and its
test only collects the result.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_ft_provider.failover import ManualClock
from airflow_ft_provider.partitions import PartitionRef, S3PartitionStore
from ft_harness.data.partition_files import RUN_ID

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


# -- the partition store on a fresh bucket of the S3 test endpoint, and a partition of it --------------
@pytest.fixture
def clock() -> ManualClock:
    # S3 stamps LastModified with real time; the store compares it with this clock.
    return ManualClock(time.time())


@pytest.fixture
def make_store(s3_bucket: Any, clock: ManualClock) -> Callable[..., S3PartitionStore]:
    def make(**kwargs: Any) -> S3PartitionStore:
        kwargs.setdefault("clock", clock)
        return S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/", **kwargs)

    return make


@pytest.fixture
def store(make_store: Callable[..., S3PartitionStore]) -> S3PartitionStore:
    return make_store()


@pytest.fixture
def ref() -> PartitionRef:
    return PartitionRef("etl", RUN_ID, "orders", 0)


@pytest.fixture
def cli_logging(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``airflow-ft``'s main() points Airflow's logging at sys.stderr, in a test the capture stream that
    closes when the test ends: the logging of the process is put back as it was after the test. Its
    manifest cache goes to a temporary folder, not the machine's ``~/.cache``."""
    import structlog

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    root = logging.getLogger()
    config, handlers, level = structlog.get_config(), list(root.handlers), root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)
