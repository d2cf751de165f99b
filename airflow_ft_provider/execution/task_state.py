"""Records a try leaves for the task's next try in Airflow's ``task_state_store``.

The store ``ResumableJobMixin`` keeps a job id in: scoped to the task instance, whatever its try, and
outliving the worker. A record read back is data from elsewhere: validated, and one that is unreadable
or damaged is passed over (the try then does what it would do without it), saying why.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class TaskStateStore(Protocol):
    """Airflow's ``context["task_state_store"]`` (the part used here)."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...

    def delete(self, key: str) -> None: ...


def read_record(
    store: TaskStateStore | None, key: str, parse: Callable[[object], T], *, record: str, unread: str
) -> tuple[T | None, str | None]:
    """The record at ``key`` parsed (None if there is none), and why one was passed over: ``parse``
    raised ValueError (it is not ``record``), or the store could not be read (``unread`` says what
    that costs)."""
    if store is None:
        return None, None
    try:
        raw = store.get(key)
    except Exception as err:  # noqa: BLE001 - without it the try does what it would do without a record
        return None, f"could not read task_state_store[{key!r}] ({err}){unread}"
    if raw is None:
        return None, None
    try:
        return parse(raw), None
    except ValueError as exc:
        return None, f"task_state_store[{key!r}] is not {record} ({exc}); passed over"


# Fields of a record read back, checked (ValueError says which and what it held).
def as_object(value: object, what: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be an object, got {reprlib.repr(value)}")
    return value


def as_text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what!r} must be a non-empty string, got {reprlib.repr(value)}")
    return value


def as_optional_text(value: object, what: str) -> str | None:
    return None if value is None else as_text(value, what)


def as_count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what!r} must be a whole number >= 0, got {reprlib.repr(value)}")
    return value
