"""How a stage declares the result partitions it reads and writes.

inputs=["raw"]                                   # all-to-all (every partition of raw)
inputs={"raw": "pointwise"}                      # Flink's pointwise rule by map index
outputs=["cleaned"]                              # blocking, snappy-compressed Parquet
outputs={"enriched": "pipelined"}
outputs=[Output("cleaned", compression="zstd")]
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_ft_provider.failover import DistributionPattern, ResultPartitionType

E = TypeVar("E", bound=enum.Enum)

COMPRESSIONS = ("snappy", "zstd", "gzip", "none")


@dataclass(frozen=True)
class Input:
    result: str
    pattern: DistributionPattern = DistributionPattern.ALL_TO_ALL


@dataclass(frozen=True)
class Output:
    result: str
    result_type: ResultPartitionType = ResultPartitionType.BLOCKING
    compression: str = "snappy"

    def __post_init__(self) -> None:
        if self.compression not in COMPRESSIONS:
            raise ValueError(
                f"output {self.result!r}: compression must be one of {', '.join(COMPRESSIONS)}, "
                f"got {self.compression!r}"
            )


def _enum_value(enum_type: type[E], value: object, what: str, name: str) -> E:
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        for member in enum_type:
            if value.strip().lower().replace("-", "_") in (member.value, member.name.lower()):
                return member
    choices = ", ".join(repr(m.value) for m in enum_type)
    raise ValueError(f"{what} {name!r}: unknown value {value!r}; use one of {choices}")


def _entries(value: object, what: str) -> Iterable[tuple[object, object]]:
    if value is None:
        return []
    if isinstance(value, (str, Input, Output)):
        return [(value, None)]
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, Iterable):
        return [(item, None) for item in value]
    raise ValueError(f"{what}s must be a name, a list of names or a mapping of name to kind, got {value!r}")


def _normalize(
    value: object, what: str, declared_type: type, kind_type: type[enum.Enum], default_kind: enum.Enum
) -> tuple[Any, ...]:
    """One declaration per name: an ``Input``/``Output`` as given, or a name with an optional kind."""
    declared: list[Any] = []
    for name, kind in _entries(value, what):
        if isinstance(name, declared_type):
            declared.append(name)
        elif isinstance(name, str):
            declared.append(
                declared_type(
                    name, default_kind if kind is None else _enum_value(kind_type, kind, what, name)
                )
            )
        else:
            raise ValueError(
                f"{what} {name!r}: expected a result name (str) or {declared_type.__name__}(...)"
            )
    _no_duplicates([d.result for d in declared], what)
    return tuple(declared)


def normalize_inputs(value: object) -> tuple[Input, ...]:
    return _normalize(value, "input", Input, DistributionPattern, DistributionPattern.ALL_TO_ALL)


def normalize_outputs(value: object) -> tuple[Output, ...]:
    return _normalize(value, "output", Output, ResultPartitionType, ResultPartitionType.BLOCKING)


def _no_duplicates(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{what} {name!r} is declared twice; declare each {what} once")
        seen.add(name)
