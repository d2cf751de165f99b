"""scripts/debian-packages.sh: which packages are missing, and installing them, with a stand-in apt-get."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ft_harness.runners import HUNG_AFTER_SECONDS

REPO = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, script: str, *, apt_rc: int = 0, uid: int = 0) -> tuple[int, str, list[str]]:
    """Run ``script`` after sourcing the helpers, apt-get and id replaced; (exit code, output, files left)."""
    bin_dir, tmp = tmp_path / "bin", tmp_path / "tmp"
    bin_dir.mkdir()
    tmp.mkdir()
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "apt-get $*"\n[ "$1" = update ] || exit {apt_rc}\n')
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp)}
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source scripts/debian-packages.sh; {script}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=HUNG_AFTER_SECONDS,
    )
    return done.returncode, done.stdout + done.stderr, sorted(p.name for p in tmp.iterdir())


def test_only_the_packages_whose_probe_finds_nothing_are_missing(tmp_path):
    rc, out, _ = run(
        tmp_path,
        'missing_debs "a=/no/such/path*" "b=bash" "c=no-such-command" "d=/bin/sh"; echo "${MISSING_DEBS[*]}"',
    )
    assert (rc, out.strip()) == (0, "a c")


def test_nothing_missing_installs_nothing(tmp_path):
    rc, out, left = run(tmp_path, 'need_debs "b=bash"')
    assert (rc, left) == (0, []) and "apt-get" not in out


def test_an_install_that_succeeds_leaves_no_log(tmp_path):
    rc, out, left = run(tmp_path, 'need_debs "a=/no/such/path" "b=bash"')
    assert rc == 0 and left == []
    assert ">> installing a (Debian packages)" in out and ">> Debian packages ready" in out


def test_an_install_that_fails_retries_after_an_update_and_shows_and_keeps_its_log(tmp_path):
    rc, out, left = run(tmp_path, 'need_debs "a=/no/such/path"', apt_rc=100)
    assert rc == 1 and len(left) == 1 and left[0].startswith("ft-apt.")
    assert f"apt-get install a failed (log: {tmp_path / 'tmp' / left[0]})" in out
    assert out.count("apt-get install -y -q a") == 2 and "apt-get update -q" in out  # tail of the log


def test_without_root_it_says_how_and_installs_nothing(tmp_path):
    rc, out, left = run(tmp_path, 'need_debs "a=/no/such/path"', uid=1000)
    assert rc == 1 and left == [] and "apt-get install -y" not in out
    assert "missing Debian packages: a (install them as root: apt-get install a)" in out
