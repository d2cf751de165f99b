"""Flink's memory size notation ("64 mb", "1 gb"; binary multiples), as its configuration writes it."""

from __future__ import annotations

import re
from decimal import Decimal

SIZE_HELP = 'write a number with a unit, e.g. "64 mb", "1 gb", "512 kb" (a bare number is bytes)'
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*\Z", re.IGNORECASE)
_SIZE_UNITS = {
    **dict.fromkeys(("", "b", "bytes"), 1),
    **dict.fromkeys(("k", "kb", "kibibytes"), 1 << 10),
    **dict.fromkeys(("m", "mb", "mebibytes"), 1 << 20),
    **dict.fromkeys(("g", "gb", "gibibytes"), 1 << 30),
    **dict.fromkeys(("t", "tb", "tebibytes"), 1 << 40),
}


def parse_size(value: object, where: str = "size") -> int:
    """Bytes of a size; at least one byte. ValueError naming ``where`` and the notation otherwise."""
    match = _SIZE.match(str(value)) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(f"{where}: not a size; {SIZE_HELP}")
    size = int(Decimal(match.group(1)) * _SIZE_UNITS[unit])
    if size < 1 or size > 1 << 50:
        raise ValueError(f"{where}: must be between 1 byte and 1 pb")
    return size


def human_size(size: int) -> str:
    """``3.1 GB``, ``256 MB``, ``12 KB``, ``0 B``: a size as people write it."""
    for unit, scale in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{size} B"
