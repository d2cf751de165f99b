"""The manifest is data from the network: every field is checked before a reader trusts it."""

from __future__ import annotations

import copy
import hashlib
import json
import zlib

import google_crc32c
import pytest

from airflow_ft_provider.partitions import (
    SCHEMA_VERSION,
    FileEntry,
    InvalidManifest,
    Manifest,
    PartitionRef,
    Producer,
    file_checksum,
)
from airflow_ft_provider.partitions.manifest import MAX_MANIFEST_BYTES
from airflow_ft_provider.partitions.provenance import Provenance

REF = PartitionRef("etl", "manual__2026-11-22T04:00:00+00:00", "orders", 2)
SHA = "sha256:" + "ab" * 32


def manifest(**overrides):
    fields = dict(
        pipeline=REF.pipeline,
        run_id=REF.run_id,
        result=REF.result,
        map_index=2,
        kind="blocking",
        attempt_id="t3-0123456789abcdef",
        producer=Producer("load_orders", 2, 3),
        files=(
            FileEntry("attempts/t3-0123456789abcdef/part-0000.parquet", 10, SHA),
            FileEntry("attempts/t3-0123456789abcdef/day=1/part-0001.parquet", 0, "crc32:0000abcd"),
        ),
        format="parquet",
        compression="zstd",
        row_count=42,
        created_at=1_795_000_000.25,
        provenance=Provenance("rows1:" + "0f" * 16, "e1" * 32),
    )
    fields.update(overrides)
    return Manifest(**fields)


def doc():
    return json.loads(manifest().to_json())


def test_round_trip_keeps_every_field():
    original = manifest()
    data = original.to_json()
    parsed = Manifest.from_json(data, expected=REF, kind="blocking")
    assert parsed == original
    d = json.loads(data)
    assert d["schema_version"] == SCHEMA_VERSION
    assert d["producer"] == {"task_id": "load_orders", "map_index": 2, "try_number": 3}
    assert d["created_at"] == "2026-11-18T11:06:40.250+00:00"
    assert [f["key"] for f in d["files"]][1] == "attempts/t3-0123456789abcdef/day=1/part-0001.parquet"
    assert parsed.files[1].name == "day=1/part-0001.parquet"
    assert parsed.total_size == 10
    assert (d["content"], d["lineage"]) == ("rows1:" + "0f" * 16, "e1" * 32)


def test_manifests_written_before_provenance_existed_still_parse():
    d = doc()
    del d["content"], d["lineage"]
    assert Manifest.from_json(json.dumps(d).encode()).provenance == Provenance()
    assert "content" not in json.loads(manifest(provenance=Provenance()).to_json())


def _mutate(path, value):
    d = doc()
    target = d
    for step in path[:-1]:
        target = target[step]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(d).encode()


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("schema_version",), 2, "schema_version 2 is not supported"),
        (("schema_version",), "1", "'schema_version' must be int"),
        (("schema_version",), KeyError, "schema_version"),
        (("row_count",), -1, "row_count must be ≥ 0"),
        (("row_count",), True, "'row_count' must be int"),
        (("files", 0, "size"), "10", "'size' must be int"),
        (("files", 0, "size"), -5, "must be ≥ 0"),
        (("files", 0, "key"), "attempts/t9-other/part.parquet", "outside the attempt directory"),
        (("files", 0, "key"), "attempts/t3-0123456789abcdef/../../../x", "segment '..' is not allowed"),
        (("files", 0, "key"), "/etc/passwd", "must be a non-empty relative path"),
        (("files", 0, "key"), "attempts/t3-0123456789abcdef/", "segment '' is not allowed"),
        (("files", 1, "key"), "attempts/t3-0123456789abcdef/part-0000.parquet", "listed twice"),
        (("files", 0, "checksum"), "md5:abcd", "checksum of"),
        (("files", 0, "checksum"), "sha256:abcd", "checksum of"),
        (("attempt_id",), "../t3", "invalid attempt id"),
        (("partition", "kind"), "weird", "partition kind"),
        (("partition", "result"), "../x", "invalid result name"),
        (("created_at",), "2026-11-22T04:00:00", "time zone"),
        (("format",), "Parquet!", "not a lowercase identifier"),
        (("producer", "try_number"), -1, "invalid try number"),
        (("files",), {"a": 1}, "'files' must be list"),
        (("content",), "rows1:xyz", "content must be '<scheme>:<32 hex>'"),
        (("content",), 7, "'content' must be str"),
        (("lineage",), "ab" * 33, "lineage must be 64 hex digits"),
    ],
)
def test_invalid_manifests_are_rejected_naming_the_problem(path, value, message):
    with pytest.raises(InvalidManifest) as excinfo:
        Manifest.from_json(_mutate(path, value), expected=REF)
    assert message in str(excinfo.value)


def test_manifest_for_another_partition_or_kind_is_rejected():
    data = manifest().to_json()
    with pytest.raises(InvalidManifest, match="expected etl/.*orders\\[3\\]"):
        Manifest.from_json(data, expected=PartitionRef(REF.pipeline, REF.run_id, "orders", 3))
    with pytest.raises(InvalidManifest, match="expected pipelined"):
        Manifest.from_json(data, kind="pipelined")


@pytest.mark.parametrize("data", [b"", b"{", b"\xff\xfe", b"[]", b"null", json.dumps({"a": 1}).encode()])
def test_garbage_is_an_invalid_manifest(data):
    with pytest.raises(InvalidManifest):
        Manifest.from_json(data)


def test_size_limit_on_read_and_write():
    d = doc()
    d["padding"] = "x" * MAX_MANIFEST_BYTES
    with pytest.raises(InvalidManifest, match="over the 1048576-byte limit"):
        Manifest.from_json(json.dumps(d).encode())
    many = tuple(
        FileEntry(f"attempts/t3-0123456789abcdef/part-{i:07d}.parquet", 1, SHA) for i in range(20000)
    )
    with pytest.raises(ValueError, match="write fewer, larger files"):
        manifest(files=many).to_json()


def test_file_checksums_match_the_standard_algorithms(tmp_path):
    data = bytes(range(256)) * 5000
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_checksum(path) == f"crc32c:{google_crc32c.value(data):08x}"  # the default
    assert file_checksum(path, "sha256") == "sha256:" + hashlib.sha256(data).hexdigest()
    assert file_checksum(path, "crc32") == f"crc32:{zlib.crc32(data):08x}"
    with pytest.raises(ValueError, match="unknown checksum algorithm 'md5'"):
        file_checksum(path, "md5")


def test_manifest_is_not_mutated_by_parsing():
    d = doc()
    before = copy.deepcopy(d)
    Manifest.from_json(json.dumps(d).encode())
    assert d == before
