"""Partitions written to S3 by another writer (Spark with s3a), then committed by the store."""

import json

import pytest

from airflow_ft_provider.partitions import PartitionNotFound, Producer, RunRef
from airflow_ft_provider.partitions.errors import PartitionStoreError, StaleCommitError
from airflow_ft_provider.partitions.store import new_attempt_id

pytestmark = pytest.mark.s3

RUN = RunRef("pipe", "manual__2026-11-22T04:00:00+00:00")


def write_like_spark(store, ref, attempt_id, files, execution_id=None):
    """What Spark's s3a committer leaves under an output directory: part files plus markers."""
    location = store.attempt_location(ref, attempt_id, execution_id=execution_id)
    bucket, prefix = location.removeprefix("s3://").split("/", 1)
    for name, data in {**files, "_SUCCESS": b"", "_FT_OUTPUT.json": b'{"rows": 2}'}.items():
        store.client.put_object(Bucket=bucket, Key=prefix + name, Body=data)


def test_uploaded_files_are_committed_with_checksums_and_read_back(make_store, tmp_path):
    store = make_store()
    ref = RUN.parse("orders[1]")
    attempt = new_attempt_id(1)
    write_like_spark(store, ref, attempt, {"part-00000.parquet": b"a" * 100, "part-00001.parquet": b"b" * 7})
    manifest = store.commit_uploaded(ref, attempt, producer=Producer("orders", 1, 1), row_count=2)
    assert [(f.name, f.size) for f in manifest.files] == [
        ("part-00000.parquet", 100),
        ("part-00001.parquet", 7),
    ]
    fetched = store.fetch(ref, tmp_path)  # verifies every checksum against the bytes
    assert [p.read_bytes() for p in fetched.paths] == [b"a" * 100, b"b" * 7]
    _, uris = store.remote_files(ref)
    assert uris == [
        store.attempt_location(ref, attempt) + n for n in ("part-00000.parquet", "part-00001.parquet")
    ]


def test_remote_files_refuse_a_truncated_object(make_store):
    store = make_store()
    ref = RUN.parse("orders")
    attempt = new_attempt_id(1)
    write_like_spark(store, ref, attempt, {"part-00000.parquet": b"x" * 50})
    store.commit_uploaded(ref, attempt, producer=Producer("orders", -1, 1))
    bucket, prefix = store.attempt_location(ref, attempt).removeprefix("s3://").split("/", 1)
    store.client.put_object(Bucket=bucket, Key=prefix + "part-00000.parquet", Body=b"x" * 10)
    with pytest.raises(PartitionNotFound, match="size mismatch"):
        store.remote_files(ref)


@pytest.mark.parametrize("committed_by", ["spark", "store"])
def test_remote_files_refuse_a_same_size_rewrite_without_downloading_it(make_store, tmp_path, committed_by):
    # direct_s3a: Spark reads the objects itself. The manifest recorded each one's ETag at commit; a
    # LIST's must match, so a rewrite to the same size is caught before Spark reads a byte.
    store = make_store()
    ref = RUN.parse("orders")
    attempt = new_attempt_id(1)
    if committed_by == "spark":
        write_like_spark(store, ref, attempt, {"part-00000.parquet": b"x" * 50})
        manifest = store.commit_uploaded(ref, attempt, producer=Producer("orders", -1, 1))
    else:
        (tmp_path / "part-00000.parquet").write_bytes(b"x" * 50)
        manifest = store.commit(ref, tmp_path, producer=Producer("orders", -1, 1))
    assert all(f.etag for f in manifest.files) and store.manifest(ref) == manifest
    store.remote_files(ref)
    key = store.layout.partition_prefix(ref) + manifest.files[0].key
    store.client.put_object(Bucket=store.bucket, Key=key, Body=b"y" * 50)
    gets = []
    store.client.meta.events.register("before-parameter-build.s3.GetObject", lambda **kw: gets.append(kw))
    with pytest.raises(PartitionNotFound, match="checksum mismatch.*ETag.*rewritten since its commit"):
        store.remote_files(ref)
    assert [g["params"]["Key"] for g in gets] == [store.layout.partition_prefix(ref) + "manifest.json"]


def test_remote_files_check_the_bytes_where_an_older_manifest_has_no_etag(make_store):
    store = make_store()
    ref = RUN.parse("orders")
    attempt = new_attempt_id(1)
    write_like_spark(store, ref, attempt, {"part-00000.parquet": b"x" * 50})
    manifest = store.commit_uploaded(ref, attempt, producer=Producer("orders", -1, 1))
    manifest_key = store.layout.partition_prefix(ref) + "manifest.json"
    older = json.loads(store.client.get_object(Bucket=store.bucket, Key=manifest_key)["Body"].read())
    for entry in older["files"]:
        del entry["etag"]
    store.client.put_object(Bucket=store.bucket, Key=manifest_key, Body=json.dumps(older).encode())
    store.remote_files(ref)  # the bytes match their checksum
    key = store.layout.partition_prefix(ref) + manifest.files[0].key
    store.client.put_object(Bucket=store.bucket, Key=key, Body=b"y" * 50)
    with pytest.raises(PartitionNotFound, match="checksum mismatch.*its checksum is crc32c:"):
        store.remote_files(ref)


def test_an_older_try_cannot_replace_a_newer_upload_and_its_data_is_removed(make_store, s3_bucket):
    store = make_store()
    ref = RUN.parse("orders")
    newer, older = new_attempt_id(2), new_attempt_id(1)
    write_like_spark(store, ref, newer, {"part-0.parquet": b"new"})
    store.commit_uploaded(ref, newer, producer=Producer("orders", -1, 2))
    write_like_spark(store, ref, older, {"part-0.parquet": b"old"})
    with pytest.raises(StaleCommitError):
        store.commit_uploaded(ref, older, producer=Producer("orders", -1, 1))
    assert store.manifest(ref).attempt_id == newer
    assert not [k for k in s3_bucket.keys() if older in k]


def test_scratch_uploads_are_committed_per_execution(make_store, tmp_path):
    store = make_store()
    ref = RUN.parse("enriched")
    attempt = new_attempt_id(3)
    write_like_spark(store, ref, attempt, {"part-0.parquet": b"pipelined"}, execution_id="t3")
    store.commit_uploaded(ref, attempt, producer=Producer("enrich", -1, 3), execution_id="t3")
    assert [p.read_bytes() for p in store.fetch(ref, tmp_path, execution_id="t3").paths] == [b"pipelined"]
    with pytest.raises(PartitionNotFound):
        store.remote_files(ref)  # never available as a blocking partition


def test_an_attempt_without_data_files_is_an_error_and_publishes_nothing(make_store):
    store = make_store()
    ref = RUN.parse("orders")
    attempt = new_attempt_id(1)
    write_like_spark(store, ref, attempt, {})
    with pytest.raises(PartitionStoreError, match="the writer produced nothing"):
        store.commit_uploaded(ref, attempt, producer=Producer("orders", -1, 1))
    with pytest.raises(PartitionNotFound, match="missing manifest"):
        store.manifest(ref)


def write_like_executors(store, ref, attempt_id, objects, record):
    """What the executors' data path leaves: each task attempt's object, then the driver's record of the
    committed ones (spark/written.py)."""
    from airflow_ft_provider.spark.written import WRITTEN_RECORD, encode_written

    bucket, prefix = store.attempt_location(ref, attempt_id).removeprefix("s3://").split("/", 1)
    for name, data in objects.items():
        store.client.put_object(Bucket=bucket, Key=prefix + name, Body=data)
    if record is not None:
        store.client.put_object(Bucket=bucket, Key=prefix + WRITTEN_RECORD, Body=encode_written(record))


def test_recorded_objects_are_committed_without_reading_them_and_a_lost_task_attempts_are_left_out(
    make_store, tmp_path
):
    from airflow_ft_provider.spark.checksums import new_hasher
    from airflow_ft_provider.spark.written import WrittenFile

    def written(name, data, rows):
        hasher = new_hasher("crc32c")
        hasher.update(data)
        return WrittenFile(name, len(data), f"crc32c:{hasher.hexdigest()}", rows)

    store = make_store()
    ref = RUN.parse("orders")
    attempt = new_attempt_id(2)
    kept = {"part-00000-a0-00000000000a.parquet": b"a" * 40, "part-00001-a1-00000000000b.parquet": b"b" * 9}
    lost = {"part-00001-a0-00000000000c.parquet": b"c" * 40}  # Spark retried this task attempt
    record = [written(n, d, rows) for (n, d), rows in zip(kept.items(), (30, 12), strict=True)]
    write_like_executors(store, ref, attempt, {**kept, **lost}, record)
    reads, lists = [], []

    def read(params, **_):
        reads.append(params["Key"])

    def listing(params, **_):
        lists.append(params.get("Prefix", ""))

    events = store.client.meta.events
    events.register("before-parameter-build.s3.GetObject", read)
    events.register("before-parameter-build.s3.ListObjectsV2", listing)
    try:
        manifest = store.commit_uploaded(
            ref, attempt, producer=Producer("orders", -1, 2), row_count=42, recorded=True
        )
    finally:
        events.unregister("before-parameter-build.s3.GetObject", read)
        events.unregister("before-parameter-build.s3.ListObjectsV2", listing)
    assert [f.name for f in manifest.files] == sorted(kept) and manifest.row_count == 42
    # One LIST of the attempt checks the sizes and gives the ETags readers compare with theirs
    assert sum(1 for p in lists if "attempts/" in p) == 1, lists
    assert all(f.etag for f in manifest.files), manifest.files
    assert not [k for k in reads if k.endswith(".parquet")] and any(
        k.endswith("_ft_written.json") for k in reads
    )
    fetched = store.fetch(ref, tmp_path)  # the recorded checksums are the objects' own
    assert [p.read_bytes() for p in fetched.paths] == list(kept.values())


@pytest.mark.parametrize(
    "problem", ["no record", "object shorter", "rows differ", "damaged record", "hostile record"]
)
def test_a_recorded_commit_that_does_not_add_up_publishes_nothing(make_store, problem):
    from airflow_ft_provider.spark.written import WrittenFile

    store = make_store()
    ref = RUN.parse("orders")
    attempt = new_attempt_id(1)
    name = "part-00000-a0-00000000000a.parquet"
    entry = WrittenFile(name, 41 if problem == "object shorter" else 40, "crc32c:00000000", 5)
    record = None if problem == "no record" else [entry]
    write_like_executors(store, ref, attempt, {name: b"a" * 40}, record)
    bucket, prefix = store.attempt_location(ref, attempt).removeprefix("s3://").split("/", 1)
    if problem == "damaged record":
        store.client.put_object(Bucket=bucket, Key=prefix + "_ft_written.json", Body=b'{"version": 1}')
    if problem == "hostile record":  # two readers could disagree on which "files" wins
        body = b'{"version": 1, "files": [], "files": []}'
        store.client.put_object(Bucket=bucket, Key=prefix + "_ft_written.json", Body=body)
    error, says = {
        "no record": (PartitionStoreError, "Spark did not finish the write"),
        "object shorter": (PartitionStoreError, "is 40 bytes; the executors recorded 41 bytes"),
        "rows differ": (ValueError, "reported 6 rows, the executors' record 5"),
        "damaged record": (ValueError, "not a version-1 record"),
        "hostile record": (ValueError, "'files' appears twice in one object; nothing was published"),
    }[problem]
    reported = 6 if problem == "rows differ" else 5
    with pytest.raises(error, match=says):
        store.commit_uploaded(
            ref, attempt, producer=Producer("orders", -1, 1), row_count=reported, recorded=True
        )
    with pytest.raises(PartitionNotFound):
        store.manifest(ref)
