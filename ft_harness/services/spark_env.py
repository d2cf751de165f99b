"""Spark as the tests run it: the pip ``pyspark`` distribution's ``spark-submit`` made runnable from the
virtual environment (PATH, SPARK_HOME, the driver's Python), quick JVM options and a class-data-sharing
archive of Spark's classes, made once per virtual environment. ``spark_env`` applies it to the test
process (the operator's ``spark-submit`` inherits it)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import IO, TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ft_harness.services.spark_host import SparkHost

SPARK_HOME = Path(__import__("pyspark").__file__).parent


# Quick JVM start for tests: C1 only, serial GC. C1 alone gets a 48 MB code cache by default, which a
# long-lived Spark Connect server fills after some hundreds of distinct stage queries (Spark compiles
# each plan's generated code): queries then fail with "VirtualMachineError: Out of space in CodeCache"
# (bench/bench_big_pipeline.py found it). The JVM's own default with tiered compilation is 240 MB.
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"
_WARM_UP_APP = """
from pyspark.sql import SparkSession, functions as F
import sys
spark = SparkSession.builder.getOrCreate()
df = spark.range(100).selectExpr("id AS key", "id * 10 AS value")
df.write.mode("overwrite").parquet(sys.argv[1])
back = spark.read.parquet(sys.argv[1])
totals = back.groupBy((F.col("key") % 7).alias("k")).agg(F.sum("value"), F.count("*"))
totals.join(back, back.key == F.col("k")).collect()
spark.stop()
"""


def _base_environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["SPARK_HOME"] = str(SPARK_HOME)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def _archive_path() -> Path:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    key = hashlib.sha256(f"{java}|{SPARK_HOME}|{__import__('pyspark').__version__}".encode()).hexdigest()[:16]
    folder = Path(os.environ.get("FT_SPARK_CDS_DIR", Path(sys.prefix) / ".spark-cds"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"spark-{key}.jsa"


@cache
def spark_class_archive() -> Path:
    """A JVM class-data-sharing archive of Spark's start-up classes (AppCDS), made once per venv.

    Every test stage is a new spark-submit; loading and verifying Spark's classes is most of its
    ~14 CPU-seconds. With the archive a tiny stage takes ~7.5 s instead (measured; README, Benchmarks).
    One warm-up application makes it (~35 s) in the background, and nobody waits for it: a JVM
    started before it exists, or one that cannot use it (other JDK or class path), silently loads
    classes the normal way (``-XX:SharedArchiveFile`` of a missing file is no error).
    """
    archive = _archive_path()
    if not archive.exists():  # made in a session of its own, which outlives this process if need be
        build = f"from {__name__} import build_spark_class_archive as b; b({str(archive)!r})"
        with (archive.parent / "warm-up.log").open("ab") as log:
            subprocess.Popen(
                [sys.executable, "-c", build],
                cwd=Path(__file__).resolve().parents[2],
                env=_base_environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    return archive


def build_spark_class_archive(archive: str) -> None:
    """Make ``archive`` by running the warm-up application (a no-op if another process made it)."""
    target = Path(archive)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one warm-up at a time; the others find the archive made
        if target.exists():
            return
        with tempfile.TemporaryDirectory() as work:
            app = Path(work) / "warm_up.py"
            app.write_text(_WARM_UP_APP)
            partial = target.parent / f".{target.name}.{os.getpid()}"
            env = _base_environment()
            env["SPARK_SUBMIT_OPTS"] = f"{FAST_JVM} -XX:ArchiveClassesAtExit={partial}"
            result = subprocess.run(
                [
                    str(SPARK_HOME / "bin" / "spark-submit"),
                    "--master",
                    "local[1]",
                    "--conf",
                    "spark.ui.enabled=false",
                    "--conf",
                    "spark.sql.shuffle.partitions=1",
                    str(app),
                    str(Path(work) / "out"),
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            if result.returncode != 0 or not partial.exists():
                partial.unlink(missing_ok=True)
                print(
                    f"no Spark class archive: the warm-up exited {result.returncode}"
                    f": {result.stderr[-2000:]}",
                    file=sys.stderr,
                )
                return
            partial.rename(target)  # atomic: a JVM sees the whole archive or none


def start_spark_process(
    command: list[str], *, env: dict[str, str], log: IO[bytes], host: SparkHost | None
) -> subprocess.Popen[bytes]:
    """A Spark daemon in a process group of its own, logging to ``log``: on ``host``, else here."""
    if host is not None:
        return host.popen(command, env=env, log=log)
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def spark_environment() -> dict[str, str]:
    env = _base_environment()
    # Test stages are seconds long: the C1 compiler and the serial collector cut the client JVM's
    # CPU time by ~40% on 2 cores, and a class-data-sharing archive of Spark halves what remains
    # (see README, Benchmarks). Production jobs keep Spark's defaults.
    if "SPARK_SUBMIT_OPTS" not in env:
        env["SPARK_SUBMIT_OPTS"] = f"{FAST_JVM} -XX:SharedArchiveFile={spark_class_archive()}"
    return env


@pytest.fixture(scope="session")
def spark_env():
    """Apply the Spark environment to this process (the operator's spark-submit inherits it)."""
    saved = dict(os.environ)
    os.environ.update(spark_environment())
    yield os.environ
    os.environ.clear()
    os.environ.update(saved)
