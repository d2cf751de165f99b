"""The logger a try writes to, as far as the package needs one: Airflow's structured task logger or a
``logging.Logger`` (both take a %-format and its arguments)."""

from __future__ import annotations

from typing import Protocol


class TaskLog(Protocol):
    def info(self, msg: str, /, *args: object) -> object: ...

    def warning(self, msg: str, /, *args: object) -> object: ...

    def error(self, msg: str, /, *args: object) -> object: ...
