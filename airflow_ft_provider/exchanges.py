"""How a stage declares the result partitions it reads and writes.

    inputs=["raw"]                                   # all-to-all (every partition of raw)
    inputs={"raw": "pointwise"}                      # Flink's pointwise rule by map index
    outputs=["cleaned"]                              # blocking, snappy-compressed Parquet
    outputs={"enriched": "pipelined"}
    outputs=[Output("cleaned", compression="zstd")]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_ft_provider.failover import DistributionPattern, ResultPartitionType

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


def _enum_value(enum_type, value, what: str, name: str):
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        for member in enum_type:
            if value.strip().lower().replace("-", "_") in (member.value, member.name.lower()):
                return member
    choices = ", ".join(repr(m.value) for m in enum_type)
    raise ValueError(f"{what} {name!r}: unknown value {value!r}; use one of {choices}")


def _entries(value, what: str) -> Iterable[tuple[object, object]]:
    if value is None:
        return []
    if isinstance(value, (str, Input, Output)):
        return [(value, None)]
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, Iterable):
        return [(item, None) for item in value]
    raise ValueError(f"{what}s must be a name, a list of names or a mapping of name to kind, got {value!r}")


def normalize_inputs(value: object) -> tuple[Input, ...]:
    inputs: list[Input] = []
    for name, kind in _entries(value, "input"):
        if isinstance(name, Input):
            inputs.append(name)
        elif isinstance(name, str):
            pattern = DistributionPattern.ALL_TO_ALL if kind is None else _enum_value(
                DistributionPattern, kind, "input", name
            )
            inputs.append(Input(name, pattern))
        else:
            raise ValueError(f"input {name!r}: expected a result name (str) or Input(...)")
    _no_duplicates([i.result for i in inputs], "input")
    return tuple(inputs)


def normalize_outputs(value: object) -> tuple[Output, ...]:
    outputs: list[Output] = []
    for name, kind in _entries(value, "output"):
        if isinstance(name, Output):
            outputs.append(name)
        elif isinstance(name, str):
            result_type = ResultPartitionType.BLOCKING if kind is None else _enum_value(
                ResultPartitionType, kind, "output", name
            )
            outputs.append(Output(name, result_type))
        else:
            raise ValueError(f"output {name!r}: expected a result name (str) or Output(...)")
    _no_duplicates([o.result for o in outputs], "output")
    return tuple(outputs)


def _no_duplicates(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{what} {name!r} is declared twice; declare each {what} once")
        seen.add(name)
