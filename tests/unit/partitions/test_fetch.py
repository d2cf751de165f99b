"""A fetch can leave out files the reader has no use for (a resumed checkpointed stage's input that its
checkpoint had read): they are neither downloaded nor returned; the others are verified as always."""

from __future__ import annotations

import pytest

from airflow_ft_provider.partitions import Producer, S3PartitionStore

pytestmark = pytest.mark.s3


def test_skipped_files_are_not_downloaded(s3_bucket, ref, tmp_path):
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/")
    source = tmp_path / "out"
    source.mkdir()
    for i in range(3):
        (source / f"part-{i}").write_bytes(bytes([i]) * 100)
    store.commit(ref, source, producer=Producer("p", 0, 1), format="binary", compression="none")
    fetched = store.fetch(ref, tmp_path / "read", skip={"part-0", "part-2"})
    assert [p.name for p in fetched.paths] == ["part-1"] and fetched.downloaded == 1
    assert sorted(p.name for p in (tmp_path / "read").iterdir()) == ["part-1"]
