"""What an error about an unknown configuration key suggests: the key meant, else every known key."""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def unknown_key_hint(key: str, known: Sequence[str]) -> str:
    """``did you mean 'x'?`` for a near miss (a typo), else ``known keys: a, b, ...``."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
