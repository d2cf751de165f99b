"""``scripts/demo.sh --airflow-home DIR`` never deletes or changes a directory that holds files.

The option used to ``rmtree`` its argument before use while its help said "use (and keep)": pointed at
``~/airflow`` it wiped a real Airflow home. It now takes a new or empty directory only.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ft_harness.runners import HUNG_AFTER_SECONDS

REPO = Path(__file__).resolve().parents[2]


def demo(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "demo" / "run_demo.py"), "--no-wait", *argv],
        capture_output=True,
        text=True,
        timeout=HUNG_AFTER_SECONDS,
        stdin=subprocess.DEVNULL,
    )


def test_a_home_with_files_is_refused_and_left_as_it_was(tmp_path):
    home = tmp_path / "airflow"
    (home / "dags").mkdir(parents=True)
    (home / "airflow.cfg").write_text("[core]\nload_examples = False\n")
    (home / "dags" / "mine.py").write_text("# my DAG\n")
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    done = demo("--airflow-home", str(home))
    assert done.returncode != 0
    assert f"--airflow-home {home}: is not empty" in done.stderr and "new or empty directory" in done.stderr
    assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in home.rglob("*")) == ["airflow.cfg", "dags", "mine.py"]


def test_a_file_is_refused(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    done = demo("--airflow-home", str(target))
    assert done.returncode != 0 and "is not a directory" in done.stderr and target.read_text() == "keep me"


def test_a_new_or_empty_directory_is_accepted(tmp_path):
    sys.path.insert(0, str(REPO))
    try:
        from demo.run_demo import usable_airflow_home
    finally:
        sys.path.remove(str(REPO))
    (tmp_path / "empty").mkdir()
    assert usable_airflow_home(str(tmp_path / "empty")) == str(tmp_path / "empty")
    assert usable_airflow_home(str(tmp_path / "new" / "home")) == str(tmp_path / "new" / "home")
    assert (tmp_path / "new" / "home").is_dir() and usable_airflow_home(None) is None
