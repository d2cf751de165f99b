"""How a restart strategy made the backoff of the failure it was last told about, as data: the words
for it are ``recovery/wording.py``'s (the core renders no sentences)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias


@dataclass(frozen=True)
class NoBackoff:
    """The strategy restarts nothing (``none``)."""


@dataclass(frozen=True)
class FixedBackoff:
    restart: int  # this restart's number, from 1
    attempts: int
    delay: float  # seconds


@dataclass(frozen=True)
class RateBackoff:
    delay: float  # seconds


@dataclass(frozen=True)
class ExponentialBackoff:
    attempt: int  # from 1
    drawn_ms: int  # initial-backoff · multiplier^(attempt - 1), before jitter
    jitter_ms: int  # drawn from ±(drawn · jitter-factor); 0 without jitter
    jittered: bool  # jitter-factor is not 0
    backoff_ms: int  # drawn + jitter, held to [initial-backoff, max-backoff]
    held_to: str | None  # "max-backoff" or "initial-backoff" when the bounds changed it


Backoff: TypeAlias = NoBackoff | FixedBackoff | RateBackoff | ExponentialBackoff
