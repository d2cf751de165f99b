"""A commit killed with SIGKILL at any step leaves the old partition or the new one, never a mix.

The child process (ft_harness/runners/commit_child.py) stops at a named step and waits; the test then
kills it, so the crash point is exact rather than a matter of timing.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

import pytest

from airflow_ft_provider.partitions import PartitionNotFound, Producer, Unavailable
from ft_harness.data.partition_files import RUN_ID, read_all, version_files, write_files
from ft_harness.services.s3_server import REPO_ROOT

pytestmark = pytest.mark.s3

STEPS = ["file_uploaded:1", "files_uploaded", "before_manifest_put", "after_manifest_put"]


def kill_commit_at(step, store, s3_bucket, ref, source, try_number):
    env = dict(os.environ, **s3_bucket.endpoint.env(), FT_TEST_PAUSE_AT=step)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ft_harness.runners.commit_child",
            store.layout.url,
            ref.pipeline,
            ref.run_id,
            ref.result,
            str(ref.map_index),
            str(try_number),
            str(source),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(REPO_ROOT),
    )
    try:
        ready, _, _ = select.select([child.stdout], [], [], 120)
        line = child.stdout.readline().strip() if ready else ""
        assert line == f"PAUSED {step}", (
            f"child did not reach {step}: {line!r} {child.stderr.read() if child.poll() is not None else ''}"
        )
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize("previous", [None, 1], ids=["no-previous", "previous-v1"])
@pytest.mark.parametrize("step", STEPS)
def test_killed_commit_leaves_old_or_new_state(store, ref, tmp_path, s3_bucket, clock, step, previous):
    #   [v1 committed?] --> child commits v2 (5 files) --SIGKILL at <step>--> readers see v1/nothing or v2
    files = 5
    if previous:
        store.commit(
            ref, write_files(tmp_path / "v1", version_files(1, files)), producer=Producer("producer", 0, 1)
        )
    kill_commit_at(step, store, s3_bucket, ref, write_files(tmp_path / "v2", version_files(2, files)), 2)
    expect_new = step == "after_manifest_put"
    check_state(store, ref, tmp_path, expect=2 if expect_new else previous, files=files)
    check_orphan_cleanup(store, ref, s3_bucket, clock)
    check_state(store, ref, tmp_path, expect=2 if expect_new else previous, files=files)


@pytest.mark.parametrize("step", ["file_uploaded:20", "before_manifest_put"])
def test_killed_commit_of_many_files(store, ref, tmp_path, s3_bucket, clock, step):
    files = 40
    store.commit(
        ref, write_files(tmp_path / "v1", version_files(1, files, 500)), producer=Producer("producer", 0, 1)
    )
    kill_commit_at(step, store, s3_bucket, ref, write_files(tmp_path / "v2", version_files(2, files, 500)), 2)
    assert len([k for k in s3_bucket.keys() if "/attempts/t2-" in k]) >= 20  # the crash left data behind
    fetched = store.fetch(ref, tmp_path / "in")
    assert read_all(fetched.paths) == version_files(1, files, 500)
    check_orphan_cleanup(store, ref, s3_bucket, clock)
    assert not [k for k in s3_bucket.keys() if "/attempts/t2-" in k]


def check_state(store, ref, tmp_path, expect, files):
    report = store.check_availability(ref.pipeline, RUN_ID, [ref.partition_id])
    target = tmp_path / f"read-{len(list(tmp_path.iterdir()))}"
    if expect is None:
        assert report.unavailable[ref.partition_id].reason is Unavailable.MISSING_MANIFEST
        with pytest.raises(PartitionNotFound):
            store.fetch(ref, target)
        return
    assert report.available == {ref.partition_id}
    fetched = store.fetch(ref, target)
    assert fetched.manifest.producer.try_number == expect
    assert read_all(fetched.paths) == version_files(expect, files)


def check_orphan_cleanup(store, ref, s3_bucket, clock):
    """Leftovers of the killed commit are kept during the grace period, then removed."""
    young = store.cleanup_orphans(ref.pipeline, RUN_ID)
    assert young.deleted_keys == ()
    clock.advance(store.orphan_grace + 120)
    store.cleanup_orphans(ref.pipeline, RUN_ID)
    try:
        manifest = store.manifest(ref)
    except PartitionNotFound:
        assert s3_bucket.keys() == {}
        return
    prefix = store.layout.partition_prefix(ref)
    assert set(s3_bucket.keys()) == {prefix + "manifest.json"} | {prefix + f.key for f in manifest.files}
