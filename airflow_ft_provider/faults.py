"""Fault injection for demos and chaos tests, driven by the DAG run's conf/params.

    {"ft_faults": [
        {"task": "score", "times": 1},                         # raise before submitting, on try 1
        {"task": "clean[2]", "times": 2, "mode": "app"},       # fail inside the Spark application
        {"task": "report", "mode": "kill"},                    # SIGKILL of the task process mid-stage
        {"task": "daily_revenue", "delete": ["scored"]},       # lose partitions before the stage reads
        {"task": "daily_revenue", "truncate": ["scored"]}      # cut a data object of each in half
    ]}

``task`` is a core task id (``stage`` or ``stage[i]``); a fault fires while try_number <= ``times``
(default 1). With ``delete`` or ``truncate`` and no ``mode`` the stage only damages its inputs
(``mode: none``) and then fails by itself with PartitionNotFound (missing object / size mismatch).
Nothing here runs unless a run asks for it.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

FAULTS_KEY = "ft_faults"
MODES = ("raise", "app", "kill", "none")


class InjectedFailure(RuntimeError):
    """A failure requested by the run's ``ft_faults``."""


@dataclass(frozen=True)
class Fault:
    task: str
    times: int = 1
    mode: str = "raise"
    delete: tuple[str, ...] = ()
    truncate: tuple[str, ...] = ()


def faults_for(context: Any, core_task: str) -> list[Fault]:
    conf = (context.get("dag_run") and context["dag_run"].conf) or {}
    raw = conf.get(FAULTS_KEY, (context.get("params") or {}).get(FAULTS_KEY, []))
    if not isinstance(raw, list):
        raise ValueError(f"{FAULTS_KEY} must be a list of objects, got {raw!r}")
    faults = []
    for entry in raw:
        if not isinstance(entry, dict) or "task" not in entry:
            raise ValueError(f"{FAULTS_KEY} entry {entry!r} needs at least a 'task'")
        mode = entry.get("mode", "none" if entry.get("delete") or entry.get("truncate") else "raise")
        if mode not in MODES:
            raise ValueError(f"{FAULTS_KEY} entry {entry!r}: mode must be one of {MODES}, got {mode!r}")
        if entry["task"] == core_task:
            faults.append(Fault(core_task, int(entry.get("times", 1)), mode, tuple(entry.get("delete", ())),
                                tuple(entry.get("truncate", ()))))
    return faults


def delete_partitions(store: Any, run: Any, partition_ids: tuple[str, ...], log: Any, *, truncate: bool = False) -> None:
    """Lose (or cut in half) one data object of each partition; the manifest stays, so the partition is
    corrupt rather than missing, and readers must notice."""
    for partition_id in partition_ids:
        ref = run.parse(partition_id)
        try:
            manifest = store.manifest(ref)
        except Exception as err:  # already gone
            log.info("fault injection: %s already unavailable (%s)", partition_id, err)
            continue
        key = store.layout.partition_prefix(ref) + manifest.files[0].key
        if truncate:
            body = store.client.get_object(Bucket=store.bucket, Key=key)["Body"].read()
            store.client.put_object(Bucket=store.bucket, Key=key, Body=body[: len(body) // 2])
        else:
            store.client.delete_object(Bucket=store.bucket, Key=key)
        log.warning("fault injection: %s %s of partition %s", "truncated" if truncate else "deleted",
                    manifest.files[0].key, partition_id)


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
