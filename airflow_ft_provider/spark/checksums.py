"""The checksums a manifest records of each data file: ``"<algorithm>:<hex digest>"``.

Stdlib (and google-crc32c for CRC-32C), so that a Spark executor that writes or reads a partition's
objects computes exactly what the store's manifest says.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Callable
from typing import Protocol


class Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...

    def hexdigest(self) -> str: ...


class _Crc32:
    """zlib's CRC-32 behind hashlib's update/hexdigest interface."""

    def __init__(self) -> None:
        self._value = 0

    def update(self, data: bytes) -> None:
        self._value = zlib.crc32(data, self._value)

    def hexdigest(self) -> str:
        return f"{self._value:08x}"


class _Crc32c:
    """CRC-32C (Castagnoli, S3's own checksum) in hardware via google-crc32c: ~10 GB/s, so verifying
    every read costs next to nothing next to the transfer."""

    def __init__(self) -> None:
        import google_crc32c

        self._checksum = google_crc32c.Checksum()

    def update(self, data: bytes) -> None:
        self._checksum.update(data)

    def hexdigest(self) -> str:
        return self._checksum.hexdigest().decode("ascii")


# crc32c (default) guards against corruption at no measurable cost; sha256 when a cryptographic
# digest is wanted (~1 GB/s per core); crc32 (zlib) needs no extra package.
CHECKSUM_ALGORITHMS: dict[str, Callable[[], Hasher]] = {
    "crc32c": _Crc32c,
    "sha256": hashlib.sha256,
    "crc32": _Crc32,
}
DEFAULT_CHECKSUM = "crc32c"
CHECKSUM = re.compile(r"^(?P<algorithm>sha256|crc32c|crc32):(?P<value>[0-9a-f]+)\Z")


def check_algorithm(algorithm: str) -> str:
    if algorithm not in CHECKSUM_ALGORITHMS:
        raise ValueError(
            f"unknown checksum algorithm {algorithm!r}: use one of {sorted(CHECKSUM_ALGORITHMS)}"
        )
    return algorithm


def new_hasher(checksum_or_algorithm: str) -> Hasher:
    """A hasher for an algorithm name, or for the algorithm of a ``"<algorithm>:<digest>"``."""
    return CHECKSUM_ALGORITHMS[check_algorithm(checksum_or_algorithm.partition(":")[0])]()
