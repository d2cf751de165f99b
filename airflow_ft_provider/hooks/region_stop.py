"""Failing the unfinished tasks of a region at once, through the REST API (one bulk PATCH).

A failure a restart cannot heal fails its task; the other tasks of its failover region would otherwise
run on (a pipelined region's peers compute data nobody will consume) until the run fails anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from airflow_ft_provider.hooks.airflow_api import AirflowApiHook, api_path

log = logging.getLogger(__name__)

# States of a task instance that has not ended (None: not scheduled yet).
UNFINISHED = {
    None,
    "none",
    "scheduled",
    "queued",
    "running",
    "up_for_retry",
    "up_for_reschedule",
    "deferred",
    "restarting",
}


def fail_unfinished(
    hook: AirflowApiHook, dag_id: str, run_id: str, keys: Collection[tuple[str, int]], note: str
) -> list[tuple[str, int]]:
    """Set every unfinished instance among ``keys`` (task id, map index) to failed, with ``note``; the
    instances it asked to fail (a running one is stopped by its supervisor)."""
    wanted = set(keys)
    doomed = sorted(
        ti.key for ti in hook.instances(dag_id, run_id) if ti.key in wanted and ti.state in UNFINISHED
    )
    if not doomed:
        return []
    entities = [
        {"task_id": task_id, "map_index": map_index, "new_state": "failed", "note": note[:1000]}
        for task_id, map_index in doomed
    ]
    answer = hook.request(
        "PATCH",
        api_path("dags", dag_id, "dagRuns", run_id, "taskInstances"),
        json={"actions": [{"action": "update", "entities": entities}]},
        idempotent=True,  # failing a failed instance again changes nothing
    )
    errors = (answer.get("update") or {}).get("errors") if isinstance(answer, dict) else None
    if errors:
        log.warning("the REST API did not fail every task asked: %s", errors)
    return doomed
