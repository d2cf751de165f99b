"""A commit copies inside S3 the files whose bytes the store has already (a checkpoint's copy of a
checkpointed stage's output) and uploads only the others; readers see one ordinary partition."""

from __future__ import annotations

import os

import pytest

from airflow_ft_provider.partitions import Producer, S3PartitionStore

pytestmark = pytest.mark.s3


def test_files_already_in_the_store_are_copied_not_uploaded(s3_bucket, ref, tmp_path):
    client = s3_bucket.client()
    calls = []
    for operation in ("PutObject", "CreateMultipartUpload", "CopyObject", "UploadPartCopy"):
        client.meta.events.register(
            f"before-call.s3.{operation}", lambda model, **_: calls.append(model.name)
        )
    store = S3PartitionStore(client, s3_bucket.url + "store/")
    source = tmp_path / "out"
    (source / "b0000000000").mkdir(parents=True)
    (source / "b0000000001").mkdir()
    old, new = source / "b0000000000" / "part-0.parquet", source / "b0000000001" / "part-0.parquet"
    old.write_bytes(os.urandom(3000))
    new.write_bytes(os.urandom(2000))
    checkpoint_object = s3_bucket.prefix + "store/etl/checkpoints/objects/abc"
    client.put_object(Bucket=s3_bucket.name, Key=checkpoint_object, Body=old.read_bytes())
    store.require_conditional_writes()  # its probe writes once per process
    calls.clear()
    manifest = store.commit(ref, source, producer=Producer("p", 0, 1), copy_from={old: checkpoint_object})
    assert calls.count("CopyObject") == 1  # the file of batch 0
    assert calls.count("PutObject") == 2  # the file of batch 1, then the manifest
    fetched = store.fetch(ref, tmp_path / "read")
    assert sorted(p.read_bytes() for p in fetched.paths) == sorted([old.read_bytes(), new.read_bytes()])
    assert [f.key.split("/", 2)[2] for f in manifest.files] == [
        "b0000000000/part-0.parquet",
        "b0000000001/part-0.parquet",
    ]


def test_a_copy_source_outside_the_store_is_refused(s3_bucket, ref, tmp_path):
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "part-0").write_bytes(b"x")
    with pytest.raises(ValueError, match="outside the store's prefix"):
        store.commit(
            ref,
            tmp_path / "out",
            producer=Producer("p", 0, 1),
            copy_from={tmp_path / "out" / "part-0": "../x"},
        )


def test_a_copy_whose_source_is_gone_is_uploaded_instead(s3_bucket, ref, tmp_path):
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "part-0").write_bytes(b"the bytes")
    gone = s3_bucket.prefix + "store/etl/checkpoints/objects/released"
    store.commit(
        ref, tmp_path / "out", producer=Producer("p", 0, 1), copy_from={tmp_path / "out" / "part-0": gone}
    )
    [path] = store.fetch(ref, tmp_path / "read").paths
    assert path.read_bytes() == b"the bytes"
