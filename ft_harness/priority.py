"""Keep a low-priority test session low in the processes it starts in sessions of their own.

Linux schedules every session as one group (the autogroup, ``kernel.sched_autogroup_enabled``, on by
default), and a process's ``nice`` value only ranks it inside its group: between groups, the group's own
nice value counts. ``scripts/test.sh`` runs the unit/S3/Spark tests in a session of their own whose
group has nice 10, so that they take only the CPU the live-Airflow session leaves idle. A process they
start with ``start_new_session=True`` (a Spark Connect server, a standalone cluster) would be a new
group at nice 0 and compete on equal terms with the live Airflow: :func:`keep_group_priority` gives
it the starting session's group nice value.
"""

from __future__ import annotations

from pathlib import Path


def group_nice(pid: int | str = "self") -> int | None:
    """The nice value of ``pid``'s scheduler group, or None where the kernel has no autogroups."""
    try:
        return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])  # "/autogroup-42 nice 10"
    except (OSError, ValueError, IndexError):
        return None


def keep_group_priority(pid: int) -> None:
    """Give the group of ``pid`` (a child that started its own session) this process's group nice value."""
    nice = group_nice()
    if not nice:
        return
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except OSError:  # the child has already exited, or the kernel refuses: it runs at the default
        pass
