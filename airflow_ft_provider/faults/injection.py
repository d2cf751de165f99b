"""The implementation of fault injection, loaded only by a try whose run asks for faults (see
``airflow_ft_provider.faults``, the seam a stage try calls)."""

from __future__ import annotations

import os
import signal
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_ft_provider.faults.request import ALLOW_KEY, FAULTS_KEY, MODES, NoFaults, requested_faults
from airflow_ft_provider.spark.failure_report import InjectedFailure  # stdlib: the driver raises it too
from airflow_ft_provider.task_log import TaskLog

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_ft_provider.failover.graph import StageGraph
    from airflow_ft_provider.partitions import RunRef, S3PartitionStore


@dataclass(frozen=True)
class Fault:
    task: str
    times: int = 1
    mode: str = "raise"
    delete: tuple[str, ...] = ()
    truncate: tuple[str, ...] = ()
    batch: int | None = None  # mode "batch": fail inside this micro-batch of a checkpointed stage


def fault_injection_allowed() -> bool:
    """``[ft_provider] allow_fault_injection`` (default false), read when a try starts."""
    from airflow.sdk import conf

    return conf.getboolean("ft_provider", ALLOW_KEY, fallback=False)


def parse_faults(
    raw: object,
    core_task: str,
    *,
    tasks: Collection[str],
    partitions: Collection[str],
    later: Collection[str] = (),
) -> list[Fault]:
    """The faults of ``raw`` (a run's ``ft_faults``) that name ``core_task``, after checking the whole
    list against the pipeline: a malformed entry, or a task or partition the pipeline does not have, is
    a ValueError naming the valid ones. A typo must not make a run "recover" from a fault never injected.
    ``later``: stages and results whose indexes the run does not know yet (``model/map_counts.py``):
    any of their ids is accepted here, and checked by their own tries."""

    def known(name: str, names: Collection[str]) -> bool:
        return name in names or name.split("[", 1)[0] in later

    if not isinstance(raw, list):
        raise ValueError(f"{FAULTS_KEY} must be a list of objects, got {raw!r}")
    faults = []
    for entry in raw:
        if not isinstance(entry, dict) or "task" not in entry:
            raise ValueError(f"{FAULTS_KEY} entry {entry!r} needs at least a 'task'")
        mode = entry.get("mode", "none" if entry.get("delete") or entry.get("truncate") else "raise")
        if mode not in MODES:
            raise ValueError(f"{FAULTS_KEY} entry {entry!r}: mode must be one of {MODES}, got {mode!r}")
        if not known(entry["task"], tasks):
            raise ValueError(
                f"{FAULTS_KEY} entry {entry!r}: the pipeline has no task {entry['task']!r}; "
                f"tasks: {_names(tasks)}"
            )
        times = entry.get("times", 1)
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ValueError(f"{FAULTS_KEY} entry {entry!r}: times must be an integer ≥ 1, got {times!r}")
        damaged: dict[str, tuple[str, ...]] = {}
        for key in ("delete", "truncate"):
            named = entry.get(key, [])
            if not isinstance(named, list) or not all(isinstance(p, str) for p in named):
                raise ValueError(f"{FAULTS_KEY} entry {entry!r}: {key} must be a list of partition ids")
            if unknown := [p for p in named if not known(p, partitions)]:
                raise ValueError(
                    f"{FAULTS_KEY} entry {entry!r}: the pipeline has no partition {unknown[0]!r}; "
                    f"partitions: {_names(partitions)}"
                )
            damaged[key] = tuple(named)
        batch = entry.get("batch")
        if (mode == "batch") != (batch is not None) or (
            batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 0)
        ):
            raise ValueError(
                f"{FAULTS_KEY} entry {entry!r}: mode 'batch' takes 'batch', the micro-batch (≥ 0) of a "
                "checkpointed stage to fail inside, and only it does"
            )
        if entry["task"] == core_task:
            faults.append(Fault(core_task, times, mode, damaged["delete"], damaged["truncate"], batch))
    return faults


def _names(names: Collection[str], limit: int = 40) -> str:
    listed = sorted(names)
    return ", ".join(listed[:limit]) + (f", … ({len(listed)} in all)" if len(listed) > limit else "")


class FaultInjector:
    """The faults one try of one task was asked for, at the two points a stage try offers."""

    def __init__(
        self,
        faults: list[Fault],
        *,
        task: str,
        try_number: int,
        store: S3PartitionStore,
        run: RunRef,
        log: TaskLog,
    ) -> None:
        self.faults = [f for f in faults if try_number <= f.times]
        self.task = task
        self.try_number = try_number
        self.store = store
        self.run = run
        self.log = log

    @property
    def fail_in_batch(self) -> int | None:
        """The micro-batch of a checkpointed stage to fail inside (its checkpoint is not completed)."""
        return next((f.batch for f in self.faults if f.mode == "batch"), None)

    @property
    def fails_in_app(self) -> bool:
        """Whether the Spark application is to fail before its first write."""
        return any(f.mode == "app" for f in self.faults)

    def before_work(self) -> None:
        """Damage the inputs named, then fail before anything is submitted if asked to."""
        for fault in self.faults:
            delete_partitions(self.store, self.run, fault.delete, self.log)
            delete_partitions(self.store, self.run, fault.truncate, self.log, truncate=True)
            if fault.mode == "raise":
                raise InjectedFailure(f"injected failure of {self.task} on try {self.try_number} (ft_faults)")

    def after_work(self) -> None:
        """A hard crash after the Spark work, before the commit."""
        if any(f.mode == "kill" for f in self.faults):
            kill_self()


def injector_for(
    context: Context,
    core_task: str,
    *,
    graph: StageGraph,
    store: S3PartitionStore,
    run: RunRef,
    log: TaskLog,
    later: Collection[str] = (),
) -> NoFaults | FaultInjector:
    """The faults this try must inject: none unless the run asks for them and the deployment allows it.
    Where it does, an invalid ``ft_faults`` fails the try without a retry (AirflowFailException): the
    same conf would fail every retry the same way."""
    raw = requested_faults(context)
    if not raw:
        return NoFaults()
    if not fault_injection_allowed():
        log.warning(
            "ignoring %s in the run's conf: fault injection is off on this deployment ([ft_provider] %s = "
            "False). It kills task processes and damages partitions, so enable it only where that is wanted "
            "(AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION=True on a test or demo deployment).",
            FAULTS_KEY,
            ALLOW_KEY,
        )
        return NoFaults()
    try:
        faults = parse_faults(
            raw, core_task, tasks=graph.task_ids(), partitions=graph.partition_ids(), later=later
        )
    except ValueError as err:
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(f"invalid ft_faults in the run's conf: {err}") from None
    if not faults:
        return NoFaults()
    return FaultInjector(
        faults, task=core_task, try_number=context["ti"].try_number, store=store, run=run, log=log
    )


def delete_partitions(
    store: S3PartitionStore,
    run: RunRef,
    partition_ids: tuple[str, ...],
    log: TaskLog,
    *,
    truncate: bool = False,
) -> None:
    """Lose (or cut in half) one data object of each partition, and this worker's cached copy of it; the
    manifest stays, so the partition is corrupt rather than missing, and readers must notice."""
    for partition_id in partition_ids:
        ref = run.parse(partition_id)
        try:
            manifest = store.manifest(ref)
        except Exception as err:  # already gone
            log.info("fault injection: %s already unavailable (%s)", partition_id, err)
            continue
        key = store.layout.partition_prefix(ref) + manifest.files[0].key
        if truncate:
            body = store.read_object(key) or b""
            store.write_object(key, body[: len(body) // 2], content_type="application/octet-stream")
        else:
            store.delete_keys([key])
        # This worker's task-local copy is lost with it, after the damage: a reader downloading from
        # then on cannot cache the old bytes again (one whose download was already in flight still can)
        if store.cache is not None:
            store.cache.path(store.bucket, key).unlink(missing_ok=True)
        log.warning(
            "fault injection: %s %s of partition %s",
            "truncated" if truncate else "deleted",
            manifest.files[0].key,
            partition_id,
        )


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
