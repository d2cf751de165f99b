"""Hostile JSON in stored objects: one ValueError subclass with the reason, never a RecursionError,
a bare ValueError from int(), a NaN that compares false with every time, or a duplicate key."""

from __future__ import annotations

import json

import pytest

from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.partitions.manifest import InvalidManifest, Manifest
from airflow_ft_provider.recovery import journal_schema
from airflow_ft_provider.safe_json import InvalidJson, load_json

DEEP = b"[" * 100_000 + b"]" * 100_000
HOSTILE = {
    "deeply-nested": (DEEP, "nested deeper than 32 levels"),
    "nested-33-levels": (b"[" * 33 + b"]" * 33, "nested deeper than 32 levels"),
    "5000-digit-integer": (b"1" + b"0" * 4999, "integer 10000000000000000000… (5000 digits) does not fit"),
    "2**63": (str(2**63).encode(), "integer 9223372036854775808 does not fit 64 bits"),
    "NaN": (b'{"at": NaN}', "NaN is not a JSON number"),
    "Infinity": (b"[Infinity]", "Infinity is not a JSON number"),
    "-Infinity": (b"-Infinity", "-Infinity is not a JSON number"),
    "float-overflowing-to-infinity": (b"1e400", "number 1e400 is out of range"),
    "duplicate-key": (b'{"attempt_id": "a", "attempt_id": "b"}', "key 'attempt_id' appears twice"),
    "lone-surrogate": (b'["\\ud800"]', "holds a lone surrogate"),
    "not-utf8": (b"\xff{}", "not UTF-8"),
    "not-json": (b"{nope", "Expecting property name"),
}


@pytest.mark.parametrize("data, says", HOSTILE.values(), ids=HOSTILE)
def test_load_json_refuses_hostile_documents_with_one_error_type(data, says):
    with pytest.raises(InvalidJson) as excinfo:
        load_json(data)
    assert says in str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)


def test_load_json_accepts_what_our_writers_write_and_bounds_size():
    doc = {"a": [1, -2, 2**63 - 1, -(2**63), 0.5, "é😀", None, True], "b": {"c": [[[]]]}}
    assert load_json(json.dumps(doc).encode()) == doc
    assert load_json(json.dumps(doc, ensure_ascii=False)) == doc
    assert load_json(b"[" * 32 + b"]" * 32) is not None
    with pytest.raises(InvalidJson, match="11 bytes, over the 10-byte limit"):
        load_json(b'"123456789"', max_bytes=10)


def test_a_hostile_manifest_is_an_invalid_manifest():
    for data, says in HOSTILE.values():
        with pytest.raises(InvalidManifest, match="manifest is not JSON") as excinfo:
            Manifest.from_json(data)
        assert says in str(excinfo.value)


@pytest.mark.parametrize(
    "data, error, says",
    [
        (DEEP, InvalidJson, "nested deeper than 32 levels"),
        (b'{"version": 1, "not_before": {"A": NaN}}', InvalidJson, "NaN is not a JSON number"),
        # float("nan") of a string would make a restart time that never comes and never passes.
        (b'{"version": 1, "not_before": {"A": "nan"}}', ValueError, "not_before['A'] must be a time"),
        (b'{"version": 1, "handled": {"A": "1e5"}}', ValueError, "handled['A'] must be a try number"),
        (b'{"version": 1, "handled": {"A": true}}', ValueError, "handled['A'] must be a try number"),
        (b'{"version": 1, "superseded": {"A": -1}}', ValueError, "superseded['A'] must be a try number"),
        (b'{"version": 1, "strategies": {"run": [1]}}', ValueError, "strategies['run'] must be an object"),
        (b"[" + b"1," * 1000 + b"1]", ValueError, "recovery state version [1, 1, 1, 1, 1, 1, ...]"),
    ],
)
def test_a_hostile_recovery_state_is_a_clear_value_error(data, error, says):
    with pytest.raises(ValueError) as excinfo:
        journal_schema.decode(data)
    assert type(excinfo.value) is error
    assert says in str(excinfo.value)
    assert len(str(excinfo.value)) < 300  # a hostile value is not echoed whole


def test_a_hostile_pipeline_description_is_a_clear_value_error():
    for data, says in HOSTILE.values():
        with pytest.raises(ValueError, match="invalid pipeline description") as excinfo:
            PipelineDescription.from_json(data)
        assert says in str(excinfo.value)
