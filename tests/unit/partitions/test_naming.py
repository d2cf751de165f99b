"""Names become S3 keys: nothing may escape the store's prefix, and run ids survive the trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_ft_provider.partitions import PartitionRef, RunRef, StoreLayout
from airflow_ft_provider.partitions.naming import (
    check_relative_path,
    decode_segment,
    encode_segment,
)

RUN_ID = "manual__2026-11-22T04:00:00+00:00"
LAYOUT = StoreLayout.from_url("s3://ft-bucket/pipelines/prod/")


def test_keys_follow_the_documented_layout():
    ref = PartitionRef("etl", RUN_ID, "orders", 3)
    assert LAYOUT.partition_prefix(ref) == (
        "pipelines/prod/etl/manual__2026-11-22T04~3A00~3A00~2B00~3A00/blocking/orders/3/"
    )
    unmapped = PartitionRef("etl", RUN_ID, "orders")
    assert LAYOUT.partition_prefix(unmapped).endswith("/blocking/orders/-1/")
    assert LAYOUT.scratch_prefix(ref, "exec-1").endswith("/scratch/exec-1/orders/3/")
    assert LAYOUT.lease_key(ref.run, "join[2]").endswith("/leases/join~5B2~5D.json")


def test_partition_ids_match_the_failover_core():
    run = RunRef("etl", RUN_ID)
    assert run.partition("orders").partition_id == "orders"
    assert run.partition("orders", None).partition_id == "orders"
    assert run.partition("orders", -1).partition_id == "orders"
    assert run.partition("orders", 4).partition_id == "orders[4]"
    assert run.parse("orders[4]") == PartitionRef("etl", RUN_ID, "orders", 4)
    assert run.parse("orders") == PartitionRef("etl", RUN_ID, "orders", -1)


@pytest.mark.parametrize(
    "pipeline, result",
    [
        ("..", "orders"),
        ("etl", ".."),
        ("etl", "../other"),
        ("/abs", "orders"),
        ("etl", "a/b"),
        ("etl", "bad\x00name"),
        ("etl", "new\nline"),
        ("", "orders"),
        ("etl", ""),
        ("etl", "with space"),
        ("etl", "x" * 251),
        ("etl", 7),
    ],
)
def test_invalid_names_are_refused_with_the_value_and_the_fix(pipeline, result):
    with pytest.raises(ValueError) as excinfo:
        PartitionRef(pipeline, RUN_ID, result)
    message = str(excinfo.value)
    assert "invalid" in message
    assert repr(pipeline)[:20] in message or repr(result)[:20] in message


@pytest.mark.parametrize("run_id", ["", ".", "..", "a/b", "a\\b", "tab\there", "nul\x00", "x" * 251])
def test_invalid_run_ids_are_refused(run_id):
    with pytest.raises(ValueError, match="invalid run id"):
        RunRef("etl", run_id)


@pytest.mark.parametrize("map_index", [-2, True, "1", 1.0])
def test_invalid_map_indexes_are_refused(map_index):
    with pytest.raises(ValueError, match="map index"):
        PartitionRef("etl", RUN_ID, "orders", map_index)


@pytest.mark.parametrize("partition", ["orders[", "orders[-1]", "[1]", "orders[1][2]", 5])
def test_invalid_partition_ids_are_refused(partition):
    with pytest.raises(ValueError):
        RunRef("etl", RUN_ID).parse(partition)


@pytest.mark.parametrize("path", ["../x", "a//b", "/abs", "a/../b", "a/./b", "", "sp ace", "ctl\x7f", "a/"])
def test_relative_file_paths_cannot_escape(path):
    with pytest.raises(ValueError, match="invalid file name"):
        check_relative_path("file name", path)


@pytest.mark.parametrize(
    "url",
    [
        "http://bucket/x",
        "s3://Bad_Bucket/",
        "s3://ab/",
        "s3://bucket/../escape/",
        "s3://bucket/a//b",
        "s3://bucket/a b",
    ],
)
def test_invalid_store_urls_are_refused(url):
    with pytest.raises(ValueError, match="invalid"):
        StoreLayout.from_url(url)


def test_store_url_normalises_the_prefix():
    assert StoreLayout.from_url("s3://bucket").prefix == ""
    assert StoreLayout.from_url("s3://bucket/a/b").prefix == "a/b/"
    assert StoreLayout.from_url("s3://bucket/a/b/").url == "s3://bucket/a/b/"


_ASCII_SAFE = st.characters(
    min_codepoint=32,
    max_codepoint=0x2FFF,
    blacklist_characters="/\\",
    blacklist_categories=("Cs", "Cc", "Cf", "Zl", "Zp", "Co", "Cn"),
)


@given(
    st.text(_ASCII_SAFE, min_size=1, max_size=60).filter(lambda s: s not in (".", "..") and s.isprintable())
)
def test_run_ids_are_encoded_reversibly_into_one_safe_segment(run_id):
    encoded = encode_segment(run_id)
    assert decode_segment(encoded) == run_id
    assert "/" not in encoded and ":" not in encoded and "+" not in encoded
    if len(encoded) > 240:  # e.g. 60 characters of 3 UTF-8 bytes each: 540 once encoded
        with pytest.raises(ValueError, match="longer than 240"):
            PartitionRef("etl", run_id, "orders", 1)
        return
    ref = PartitionRef("etl", run_id, "orders", 1)
    key = LAYOUT.partition_prefix(ref)
    assert key.startswith("pipelines/prod/etl/")
    assert key.split("/")[3] == encoded  # exactly one segment, so it cannot climb out
    assert LAYOUT.run_from_prefix("etl", LAYOUT.run_prefix(ref.run)) == ref.run
