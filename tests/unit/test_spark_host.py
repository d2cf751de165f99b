"""The Spark host of the two-host tests (ft_harness/services/spark_host.py) shares no disk with this side:
what passes there cannot have passed through a file both sides see.

    this side (Airflow, the tests)  ──network──▶  Spark host (private /tmp, no checkout; the venv stays)
"""

import os
import sys

import pytest

from ft_harness.runners import HUNG_AFTER_SECONDS
from ft_harness.services.spark_host import REPOSITORY

pytestmark = [pytest.mark.spark]


def test_the_spark_host_sees_neither_our_temporary_files_nor_the_checkout(spark_host, tmp_path):
    mine = tmp_path / "written-here"
    mine.write_text("the Airflow side's")
    probe = spark_host.run(
        [
            sys.executable,
            "-c",
            "import os, sys, pyspark, pyarrow\n"
            f"print(os.path.exists({str(mine)!r}), os.path.exists({str(REPOSITORY / 'README.md')!r}))\n"
            "open('/tmp/written-there', 'w').write('the Spark host\\'s')\n"
            "try:\n    import airflow_ft_provider\nexcept ImportError:\n    print('no package')",
        ],
        env=dict(os.environ),
        timeout=HUNG_AFTER_SECONDS,
    )
    assert probe.returncode == 0, probe.stderr
    # pyspark and pyarrow are installed there (the venv); our files and our package are not
    assert probe.stdout.split() == ["False", "False", "no", "package"]
    assert not os.path.exists("/tmp/written-there")  # its /tmp is its own
    assert spark_host.path("/tmp/written-there").read_text() == "the Spark host's"  # read as a remote log
