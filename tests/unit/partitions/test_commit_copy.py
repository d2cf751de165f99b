"""A commit copies inside S3 the files whose bytes the store has already (a checkpoint's copy of a
checkpointed stage's output) and uploads only the others; files only in the store (output a restored
checkpoint left there) are committed from it alone; readers see one ordinary partition."""

from __future__ import annotations

import hashlib
import os

import pytest

from airflow_ft_provider.partitions import (
    PartitionNotFound,
    PartitionStoreError,
    Producer,
    S3PartitionStore,
    StoredCopy,
)

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
    manifest = store.commit(
        ref, source, producer=Producer("p", 0, 1), copy_from={old: _copy(checkpoint_object, old.read_bytes())}
    )
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
            copy_from={tmp_path / "out" / "part-0": _copy("../x", b"x")},
        )


def test_a_copy_whose_source_is_gone_is_uploaded_instead(s3_bucket, ref, tmp_path):
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "part-0").write_bytes(b"the bytes")
    gone = s3_bucket.prefix + "store/etl/checkpoints/objects/released"
    store.commit(
        ref,
        tmp_path / "out",
        producer=Producer("p", 0, 1),
        copy_from={tmp_path / "out" / "part-0": _copy(gone, b"the bytes")},
    )
    [path] = store.fetch(ref, tmp_path / "read").paths
    assert path.read_bytes() == b"the bytes"


def _copy(key: str, data: bytes) -> StoredCopy:
    return StoredCopy(key, len(data), "sha256:" + hashlib.sha256(data).hexdigest())


def test_files_only_in_the_store_are_committed_from_it_with_their_checksums(s3_bucket, ref, tmp_path):
    client = s3_bucket.client()
    store = S3PartitionStore(client, s3_bucket.url + "store/")
    source = tmp_path / "out"
    (source / "b0000000001").mkdir(parents=True)
    (source / "b0000000001" / "part-0.parquet").write_bytes(b"new batch")
    kept = {}
    for batch, data in ((0, b"batch zero"), (1, b"batch one, second file")):
        key = s3_bucket.prefix + f"store/etl/checkpoints/objects/{hashlib.sha256(data).hexdigest()}"
        client.put_object(Bucket=s3_bucket.name, Key=key, Body=data)
        kept[source / f"b{batch:010d}" / f"part-{batch + 1}.parquet"] = _copy(key, data)
    kept[source / "b0000000000" / ".hidden"] = _copy(key, b"batch one, second file")  # never committed
    manifest = store.commit(ref, source, producer=Producer("p", 0, 1), copy_from=kept)
    assert [(f.key.split("/", 2)[2], f.checksum.split(":")[0]) for f in manifest.files] == [
        ("b0000000000/part-1.parquet", "sha256"),  # its checksum is the checkpoint's SHA-256
        ("b0000000001/part-0.parquet", "crc32c"),
        ("b0000000001/part-2.parquet", "sha256"),
    ]
    fetched = store.fetch(ref, tmp_path / "read")  # every file checked against its manifest checksum
    assert sorted(p.read_bytes() for p in fetched.paths) == [
        b"batch one, second file",
        b"batch zero",
        b"new batch",
    ]


def test_a_file_only_in_the_store_whose_object_is_gone_publishes_nothing(s3_bucket, ref, tmp_path):
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/")
    source = tmp_path / "out"
    (source / "b0000000001").mkdir(parents=True)
    (source / "b0000000001" / "part-0.parquet").write_bytes(b"new batch")
    gone = s3_bucket.prefix + "store/etl/checkpoints/objects/" + "0" * 64
    with pytest.raises(PartitionStoreError, match="only in the store.*clear the task"):
        store.commit(
            ref,
            source,
            producer=Producer("p", 0, 1),
            copy_from={source / "b0000000000" / "part-0.parquet": _copy(gone, b"lost")},
        )
    with pytest.raises(PartitionNotFound):
        store.manifest(ref)
    assert not [k for k in s3_bucket.keys("store/") if "/attempts/" in k]  # the attempt's data removed
