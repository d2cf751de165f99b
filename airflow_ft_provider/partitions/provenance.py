"""What a committed partition holds and what it was computed from: the keys of reuse.

Nothing finished is computed twice: a consumer re-run because its producer re-ran (a restarted region's
consumers are rescheduled, as in Flink) need not run Spark again when its inputs hold the same rows as
when it last committed. Two fingerprints, recorded in each blocking partition's manifest, tell it:

- ``content``: an order-independent checksum of the rows (``spark/content.py``), so that a producer
  whose re-run wrote the same rows into different files still counts as unchanged;
- ``lineage``: a digest of the producing stage's identity (its code, arguments and result-affecting
  Spark conf) and of each input's ``content``. A try whose lineage equals its own last committed
  output's reuses that output (``operators/reuse.py``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

CONTENT = re.compile(r"^[a-z][a-z0-9]{0,15}:[0-9a-f]{32}\Z")
LINEAGE = re.compile(r"^[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class Provenance:
    """The fingerprints of one partition (None: not known, so never reused from or by)."""

    content: str | None = None
    lineage: str | None = None

    def __post_init__(self) -> None:
        if self.content is not None and not (isinstance(self.content, str) and CONTENT.match(self.content)):
            raise ValueError(f"content must be '<scheme>:<32 hex>', got {self.content!r}")
        if self.lineage is not None and not (isinstance(self.lineage, str) and LINEAGE.match(self.lineage)):
            raise ValueError(f"lineage must be 64 hex digits, got {self.lineage!r}")


UNKNOWN = Provenance()  # what manifests written before provenance existed, and views, have


def lineage_key(identity: str, inputs: Mapping[str, str]) -> str:
    """The lineage of an output of stage ``identity`` (a digest of its code and settings) computed from
    ``inputs`` (partition id -> content checksum): equal keys, equal results."""
    text = json.dumps({"stage": identity, "inputs": sorted(inputs.items())}, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
