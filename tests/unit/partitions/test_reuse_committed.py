"""Reusing a committed partition for a newer try of its producer (partitions/reuse.py), on the S3
endpoint: same files, the new try as producer, fenced like any commit, refused when anything differs."""

from __future__ import annotations

import pytest

from airflow_ft_provider.partitions import Producer, StaleCommitError
from airflow_ft_provider.partitions.provenance import Provenance, lineage_key
from ft_harness.data.partition_files import read_all, version_files, write_files

pytestmark = pytest.mark.s3

CONTENT = "rows1:" + "ab" * 16
LINEAGE = lineage_key("stage-identity", {"in[0]": CONTENT})


def commit_try_1(store, ref, tmp_path):
    files = write_files(tmp_path / "src", version_files(1))
    return store.commit(ref, files, producer=Producer("p", 0, 1), provenance=Provenance(CONTENT, LINEAGE))


def test_a_reused_output_names_the_same_files_for_the_new_try(store, ref, tmp_path, s3_bucket):
    first = commit_try_1(store, ref, tmp_path)
    objects_before = set(s3_bucket.keys())
    reused = store.reuse_output(ref, Producer("p", 0, 2), lineage=LINEAGE)
    assert reused is not None
    current = store.manifest(ref)
    assert current.producer.try_number == 2
    assert (current.attempt_id, current.files) == (first.attempt_id, first.files)
    assert current.provenance == Provenance(CONTENT, LINEAGE)
    assert read_all(store.fetch(ref, tmp_path / "in").paths) == version_files(1)
    assert set(s3_bucket.keys()) == objects_before  # no data copied: only the manifest was rewritten
    # the orphan cleanup keeps the attempt the reused manifest names
    assert store.cleanup_orphans(ref.pipeline, ref.run_id, grace=0).deleted_keys == ()


def test_no_reuse_when_the_lineage_or_the_task_differs_or_a_file_is_gone(store, ref, tmp_path, s3_bucket):
    first = commit_try_1(store, ref, tmp_path)
    other = lineage_key("stage-identity", {"in[0]": "rows1:" + "cd" * 16})
    assert store.reuse_output(ref, Producer("p", 0, 2), lineage=other) is None
    assert store.reuse_output(ref, Producer("q", 0, 2), lineage=LINEAGE) is None  # not its own output
    gone = store.layout.partition_prefix(ref) + first.files[0].key
    s3_bucket.client().delete_object(Bucket=s3_bucket.name, Key=gone)
    assert store.reuse_output(ref, Producer("p", 0, 2), lineage=LINEAGE) is None
    assert store.manifest(ref).producer.try_number == 1  # nothing was written


def test_a_reuse_never_replaces_a_newer_trys_commit(store, ref, tmp_path):
    commit_try_1(store, ref, tmp_path)
    newer = store.commit(
        ref,
        write_files(tmp_path / "v3", version_files(3)),
        producer=Producer("p", 0, 3),
        provenance=Provenance(CONTENT, LINEAGE),
    )
    with pytest.raises(StaleCommitError):
        store.reuse_output(ref, Producer("p", 0, 2), lineage=LINEAGE)
    assert store.manifest(ref).attempt_id == newer.attempt_id


def test_a_manifest_without_provenance_is_never_reused(store, ref, tmp_path):
    store.commit(ref, write_files(tmp_path / "src", version_files(1)), producer=Producer("p", 0, 1))
    assert store.manifest(ref).provenance == Provenance()
    assert store.reuse_output(ref, Producer("p", 0, 2), lineage=LINEAGE) is None
