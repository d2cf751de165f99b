"""Objects written straight into the bucket by someone else: hostile JSON, crafted manifests, bad
markers, leases and journal entries. Each is refused or marked invalid with a reason; none crashes a
reader, writes outside its directory, releases a run early or stops a sweep.

    <run>/blocking/orders/0/manifest.json         crafted manifests
    <run>/_run/{succeeded,releasing}.json         run markers
    <run>/leases/<consumer>.json                  leases
    <run>/_failover/{state,pipeline}.json, events/…   the recovery journal
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from airflow_ft_provider.failover import ManualClock
from airflow_ft_provider.partitions import (
    ConsumerRegistrationRefused,
    PartitionNotFound,
    PartitionRef,
    Producer,
    ReleaseRefused,
    RunRef,
    S3PartitionStore,
    Unavailable,
)
from airflow_ft_provider.partitions.store import new_attempt_id
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.recovery.journal_schema import event_from_json
from ft_harness.data.journal_records import stored_events
from ft_harness.data.partition_files import RUN_ID, read_all, version_files, write_files

pytestmark = pytest.mark.s3

REF = PartitionRef("etl", RUN_ID, "orders", 0)
DEEP = b"[" * 100_000 + b"]" * 100_000


def put(store: S3PartitionStore, key: str, body: bytes | dict | list) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    store.client.put_object(Bucket=store.bucket, Key=key, Body=data)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def manifest_key(store: S3PartitionStore, ref: PartitionRef = REF) -> str:
    return store.layout.partition_prefix(ref) + "manifest.json"


def commit(store: S3PartitionStore, tmp_path: Path, version: int, ref: PartitionRef = REF):
    source = write_files(tmp_path / f"src-{ref.result}-v{version}", version_files(version, count=2))
    return store.commit(ref, source, producer=Producer("p", ref.map_index, version))


# -- manifests --------------------------------------------------------------------------------------
def _with_size(size: bytes):
    return lambda valid: re.sub(rb'"size": \d+', b'"size": ' + size, valid, count=1)


@pytest.mark.parametrize(
    "craft, says",
    [
        (lambda valid: DEEP, "nested deeper than 32 levels"),
        (lambda valid: valid[:-2] + b', "x": ' + DEEP + b"}", "nested deeper than 32 levels"),
        (_with_size(b"1" + b"0" * 4999), "does not fit 64 bits"),
        (_with_size(b"NaN"), "NaN is not a JSON number"),
        (
            lambda valid: valid.replace(b'"attempt_id"', b'"attempt_id": "t9-x", "attempt_id"', 1),
            "appears twice",
        ),
    ],
    ids=["deeply-nested", "deeply-nested-inside", "5000-digit-size", "NaN-size", "duplicate-attempt-id"],
)
def test_a_hostile_manifest_is_unavailable_and_the_next_commit_replaces_it(store, tmp_path, craft, says):
    commit(store, tmp_path, 1)
    valid = store.manifest(REF).to_json()
    put(store, manifest_key(store), craft(valid))

    with pytest.raises(PartitionNotFound) as excinfo:
        store.fetch(REF, tmp_path / "in")
    assert excinfo.value.reason is Unavailable.INVALID_MANIFEST and says in str(excinfo.value)
    report = store.check_availability("etl", RUN_ID, [REF])
    assert report.unavailable["orders[0]"].reason is Unavailable.INVALID_MANIFEST
    assert not (tmp_path / "in").exists()
    # Backtracking re-runs the producer, whose commit replaces the hostile manifest.
    commit(store, tmp_path, 2)
    assert read_all(store.fetch(REF, tmp_path / "in").paths) == version_files(2, count=2)


@pytest.mark.parametrize("cached", [False, True], ids=["dest", "cache"])
def test_a_manifest_listing_a_file_and_a_directory_of_that_name_is_invalid_not_an_os_error(
    s3_bucket, tmp_path, cached
):
    store = S3PartitionStore(
        s3_bucket.client(), s3_bucket.url + "store/", cache=tmp_path / "cache" if cached else None
    )
    manifest = commit(store, tmp_path, 1)
    doc = json.loads(manifest.to_json())
    first = doc["files"][0]
    # The object exists with the right size and checksum: only the layout is impossible on a disk.
    put(
        store,
        store.layout.partition_prefix(REF) + first["key"] + "/inner",
        (tmp_path / "src-orders-v1" / "part-0000.bin").read_bytes(),
    )
    doc["files"].append({**first, "key": first["key"] + "/inner"})
    put(store, manifest_key(store), doc)
    with pytest.raises(PartitionNotFound) as excinfo:
        store.fetch(REF, tmp_path / "in")
    assert excinfo.value.reason is Unavailable.INVALID_MANIFEST
    inner = first["key"] + "/inner"
    assert f"file key {first['key']!r} is also the directory of {inner!r}" in str(excinfo.value)


@pytest.mark.parametrize(
    "key",
    [
        "../../../../escaped.bin",
        "attempts/{attempt}/../../../../escaped.bin",
        "attempts/{attempt}/..\\..\\escaped.bin",
        "attempts/other-attempt/part-0000.bin",
        "attempts/{attempt}/./part-0000.bin",
        "/tmp/escaped.bin",
        "attempts/{attempt}/",
    ],
)
@pytest.mark.parametrize("cached", [False, True], ids=["dest", "cache"])
def test_a_crafted_file_key_never_writes_outside_the_cache_or_dest(s3_bucket, tmp_path, key, cached):
    #   a manifest of attempt X planted straight into the bucket, its first file key replaced by ``key``
    store = S3PartitionStore(
        s3_bucket.client(), s3_bucket.url + "store/", cache=tmp_path / "work" / "cache" if cached else None
    )
    manifest = commit(store, tmp_path, 1)
    doc = json.loads(manifest.to_json())
    doc["files"][0]["key"] = key.format(attempt=manifest.attempt_id)
    put(store, manifest_key(store), doc)
    before = files_under(tmp_path)
    with pytest.raises(PartitionNotFound) as excinfo:
        store.fetch(REF, tmp_path / "work" / "in")
    assert excinfo.value.reason is Unavailable.INVALID_MANIFEST
    assert files_under(tmp_path) == before
    assert not Path("/tmp/escaped.bin").exists()


def test_downloads_refuse_a_symlink_planted_in_dest(store, tmp_path):
    #   dest/sub -> outside/ ;  the partition holds sub/part-0.bin (a Hive-style directory)
    source = write_files(tmp_path / "src", {"sub/part-0.bin": b"data", "top.bin": b"top"})
    store.commit(REF, source, producer=Producer("p", 0, 1))
    outside, dest = tmp_path / "outside", tmp_path / "dest"
    outside.mkdir()
    dest.mkdir()
    (dest / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="refusing to write partition file 'sub/part-0.bin'") as excinfo:
        store.fetch(REF, dest)
    assert f"outside {tmp_path.resolve() / 'dest'}" in str(excinfo.value)
    assert "a symlink in the destination?" in str(excinfo.value)
    assert files_under(outside) == [] and files_under(dest) == ["sub"]


# -- uploads by another writer ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["part 0.parquet", "part:0.parquet", "-part.parquet", "part\u00e9.parquet"])
def test_commit_uploaded_refuses_file_names_the_reader_would_reject(store, s3_bucket, name):
    attempt = new_attempt_id(1)
    location = store.attempt_location(REF, attempt)
    bucket, prefix = location.removeprefix("s3://").split("/", 1)
    store.client.put_object(Bucket=bucket, Key=prefix + "part-1.parquet", Body=b"ok")
    store.client.put_object(Bucket=bucket, Key=prefix + name, Body=b"bad")
    before = s3_bucket.keys()
    with pytest.raises(ValueError) as excinfo:
        store.commit_uploaded(REF, attempt, producer=Producer("p", 0, 1))
    message = str(excinfo.value)
    assert f"cannot publish s3://{bucket}/{prefix}{name}" in message
    assert f"invalid file name {name!r}" in message and "make the writer name its files that way" in message
    assert s3_bucket.keys() == before  # nothing published, the writer's files left to inspect
    with pytest.raises(PartitionNotFound, match="missing manifest"):
        store.manifest(REF)


# -- run markers and leases -------------------------------------------------------------------------
def test_damaged_end_markers_neither_release_their_run_nor_stop_the_sweep(s3_bucket, tmp_path):
    clock = ManualClock(time.time() + 1000)
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/", clock=clock, retention=10.0)
    markers = {
        "nan": b'{"at": NaN}',
        "nan-string": {"at": "nan"},
        "list": [1],
        "deep": DEEP,
        "missing-at": {},
        "boolean": {"at": True},
        "negative-retention": {"at": clock.now() - 60, "retention": -1},
        "nan-retention": {"at": clock.now() - 60, "retention": "nan"},
        "good": {"at": clock.now() - 60},
    }
    for name, marker in markers.items():
        ref = PartitionRef("etl", f"run-{name}", "orders", 0)
        commit(store, tmp_path, 1, ref)
        put(store, store.layout.marker_key(ref.run, "ended"), marker)
    outcomes = {o.run.run_id.removeprefix("run-"): o for o in store.release_expired_runs("etl")}
    assert {name for name, o in outcomes.items() if o.released} == {"good"}
    for name in set(markers) - {"good"}:
        reason = outcomes[name].reason
        assert f"run marker s3://{store.bucket}/" in reason and "is invalid" in reason, reason
        assert "not releasing the run" in reason and "delete it and mark the run ended again" in reason
        store.manifest(PartitionRef("etl", f"run-{name}", "orders", 0))  # still there


@pytest.mark.parametrize(
    "lease",
    [
        b'{"consumer": "join", "partitions": null, "registered_at": 0, "expires_at": NaN}',
        {"consumer": "join", "partitions": None, "registered_at": 0, "expires_at": "nan"},
        {"consumer": "join", "partitions": None, "registered_at": 0, "expires_at": "-inf"},
        {"consumer": "join", "partitions": "orders[0]"},
        DEEP,
        b"x" * (2 << 20),
    ],
    ids=["NaN-expiry", "nan-string-expiry", "inf-string-expiry", "partitions-a-string", "deep", "oversized"],
)
def test_a_damaged_lease_still_blocks_release(store, tmp_path, s3_bucket, lease):
    commit(store, tmp_path, 1)
    put(store, store.layout.lease_key(REF.run, "join"), lease)
    before = s3_bucket.keys()
    with pytest.raises(ReleaseRefused, match="still needed by registered consumer"):
        store.release_run("etl", RUN_ID)
    assert s3_bucket.keys() == before


def test_a_damaged_releasing_marker_refuses_new_consumers(store, tmp_path):
    commit(store, tmp_path, 1)
    put(store, store.layout.marker_key(REF.run, "releasing"), DEEP)
    with pytest.raises(ConsumerRegistrationRefused, match="are being released"):
        store.register_consumer("etl", RUN_ID, "join")


# -- the recovery journal ---------------------------------------------------------------------------
def test_one_bad_journal_event_does_not_break_the_history(store):
    #   2 good events (t=100, t=300) and bad ones planted between and around them
    journal = RecoveryJournal(store, RunRef("etl", RUN_ID))
    journal.record(
        event_from_json(
            {
                "time": 300.0,
                "kind": "manual",
                "task": "B",
                "reason": "operator",
                "regions": [["B"]],
                "tasks": ["B"],
                "cleared": ["B"],
            }
        )
    )
    journal.record(
        event_from_json(
            {
                "time": 100.0,
                "kind": "failover",
                "task": "A",
                "restart": True,
                "delay": 1.0,
                "regions": [["A"]],
                "tasks": ["A"],
                "cleared": [],
                "strategy_state": None,
            }
        )
    )
    bad = {
        "deep": DEEP,
        "nan-time": b'{"time": NaN, "kind": "failover"}',
        "string-time": {"time": "yesterday"},
        "no-time": {"kind": "failover"},
        "a-list": [1],
        "regions-not-lists": {"time": 5, "regions": ["A"]},
        "task-an-object": {"time": 5, "task": {"$gt": ""}},
        "oversized": b"x" * (300 << 10),
    }
    for name, body in bad.items():
        put(store, f"{journal.events_prefix}20260101T000000-{name}.json", body)

    events = stored_events(journal)
    assert [e["kind"] for e in events if e["kind"] != "invalid"] == ["failover", "manual"]
    invalid = [e for e in events if e["kind"] == "invalid"]
    assert sorted(e["key"].rsplit("-", 1)[-1].removesuffix(".json") for e in invalid) == sorted(
        n.rsplit("-", 1)[-1] for n in bad
    )
    for event in invalid:
        assert f"recovery journal event s3://{store.bucket}/{event['key']} is invalid" in event["reason"]
        assert event["reason"].endswith("delete or repair it") and len(event["reason"]) < 500
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    json.dumps(events, sort_keys=True)  # what `airflow-ft history` prints


@pytest.mark.parametrize(
    "body, says",
    [
        (DEEP, "nested deeper than 32 levels"),
        (b'{"version": 1, "not_before": {"A": NaN}}', "NaN"),
        (b'{"version": 1, "not_before": {"A": "nan"}}', "not_before['A'] must be a time in seconds"),
    ],
)
def test_a_hostile_journal_state_or_description_is_a_value_error(store, body, says):
    journal = RecoveryJournal(store, RunRef("etl", RUN_ID))
    put(store, journal.state_key, body)
    with pytest.raises(ValueError, match="recovery state") as excinfo:
        journal.load()
    assert says in str(excinfo.value)
    put(store, journal.description_key, DEEP)
    with pytest.raises(ValueError, match="invalid pipeline description: nested deeper than 32 levels"):
        journal.description()
