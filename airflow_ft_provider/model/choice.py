"""One of a setting's named values (an ``enum.Enum`` whose values are the names users write)."""

from __future__ import annotations

import enum
from typing import TypeVar

E = TypeVar("E", bound=enum.Enum)


def parse_choice(kind: type[E], value: object, *, where: str, key: str, see: str) -> E:
    """``value`` as declared (a member of ``kind`` or its name); a ValueError naming ``where``, the key,
    the names it may take, the value given and the docs page ``see`` otherwise."""
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(repr(member.value) for member in kind)
        raise ValueError(f"{where}: {key} must be one of {names}, got {value!r} (docs: {see})") from None
