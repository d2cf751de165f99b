"""Parsing JSON that anyone with write access to the bucket may have written, within limits.

Manifests, markers, leases, the recovery journal and the stored pipeline description are read back
from S3. ``json.loads`` accepts documents that no writer of ours produces and that break the code
after it in ways its validators do not catch: ``NaN`` (a NaN time compares false with everything, so
"not before" becomes "now"), integers of thousands of digits (a plain ``ValueError`` from ``int()``),
nesting deep enough for ``RecursionError``, duplicate keys (two readers may disagree on which one
wins) and lone surrogates (any later UTF-8 encoding fails). ``load_json`` refuses all of them with one
exception, ``InvalidJson`` (a ``ValueError``), which each reader turns into its own "invalid" error.

Why the standard library: its ``parse_constant`` / ``parse_int`` / ``parse_float`` /
``object_pairs_hook`` hooks cover every limit but depth, which a ``RecursionError`` and an iterative
walk cover. The faster parsers at hand do not remove the need for this wrapper: ``pydantic_core``'s
``from_json`` has a fixed depth limit, turns ``1e400`` into infinity and keeps 4,300-digit integers;
``msgspec`` raises ``RecursionError`` itself and keeps duplicate keys.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import NoReturn, TypeGuard

MAX_BYTES = 1 << 20
MAX_DEPTH = 32  # our documents nest 5 levels at most
MAX_INT = 2**63  # integers must fit a signed 64-bit integer, as in every other JSON reader we meet
_MAX_INT_CHARS = len(str(-MAX_INT))


class InvalidJson(ValueError):
    """A document that is not JSON, or JSON outside the limits; the message says which."""


def is_finite_number(value: object) -> TypeGuard[int | float]:
    """Whether a parsed JSON value is a finite number: not a bool (``true`` is no time) and not a
    string such as ``"nan"`` (``float()`` would accept it and make a time that never compares)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def load_json(data: bytes | str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> object:
    """Parse ``data`` (UTF-8), refusing anything over ``max_bytes`` or ``max_depth`` levels, NaN and
    Infinity, numbers outside 64-bit integers and finite floats, duplicate keys and lone surrogates."""
    if len(data) > max_bytes:
        raise InvalidJson(f"{len(data)} bytes, over the {max_bytes}-byte limit")
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidJson(f"not UTF-8 ({exc})") from None
    try:
        doc = json.loads(
            data,
            parse_constant=_refuse_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except RecursionError:
        raise InvalidJson(f"nested deeper than {max_depth} levels") from None
    except InvalidJson:
        raise
    except json.JSONDecodeError as exc:
        raise InvalidJson(str(exc)) from None
    _check_tree(doc, max_depth)
    return doc


def is_object_list(value: object) -> TypeGuard[list[Mapping[str, object]]]:
    """A parsed JSON list whose every item is an object."""
    return isinstance(value, list) and all(isinstance(item, Mapping) for item in value)


def load_json_object(data: bytes | str, *, max_bytes: int = MAX_BYTES) -> dict[str, object]:
    """``load_json`` of a document that must be a JSON object (InvalidJson otherwise)."""
    doc = load_json(data, max_bytes=max_bytes)
    if not isinstance(doc, dict):
        raise InvalidJson(f"a JSON object was expected, got {type(doc).__name__}")
    return doc


def _refuse_constant(name: str) -> NoReturn:
    raise InvalidJson(f"{name} is not a JSON number")


def _bounded_int(text: str) -> int:
    # Checked on the text first: int() of a 5,000-digit string is slow, or an error past 4,300 digits.
    value = int(text) if len(text) <= _MAX_INT_CHARS else None
    if value is None or not -MAX_INT <= value < MAX_INT:
        shown = text if len(text) <= 30 else f"{text[:20]}… ({len(text)} digits)"
        raise InvalidJson(f"integer {shown} does not fit 64 bits")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidJson(f"number {text[:30]} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise InvalidJson(f"key {duplicate[:80]!r} appears twice in one object")
    return doc


def _check_tree(doc: object, max_depth: int) -> None:
    """Depth and strings, iteratively (a recursive walk is what the depth limit protects against)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise InvalidJson(f"nested deeper than {max_depth} levels")
            if isinstance(value, dict):
                for key in value:
                    _check_text(key)
                stack.extend((item, depth + 1) for item in value.values())
            else:
                stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            _check_text(value)


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidJson(f"string {text[:40]!r} holds a lone surrogate (\\ud800-\\udfff)") from None
