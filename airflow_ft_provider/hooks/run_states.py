"""What Airflow says of a pipeline's runs, for the life-cycle sweep (``partitions/sweep.py``).

The run-end callback marks its own run ended, but Airflow calls no DAG callback for a run marked failed or
successful by hand, and a run cleared after it ended is running again whatever its marker says. Two reads
of the public REST API (``GET /api/v2/dags/{dag_id}/dagRuns``) tell both: the runs that ended before a
cutoff (the only ones a sweep can release), and the runs queued or running now.
"""

from __future__ import annotations

from datetime import datetime, timezone

from airflow_ft_provider.hooks.airflow_api import AirflowApiHook, api_path
from airflow_ft_provider.partitions.sweep import RunStates

ENDED = ("success", "failed")
ACTIVE = ("queued", "running")


def run_states(hook: AirflowApiHook, dag_id: str, *, ended_before: float) -> RunStates:
    """The DAG's runs that ended before ``ended_before`` (seconds since the epoch), with their end, and
    the ones active now."""
    path = api_path("dags", dag_id, "dagRuns")
    cutoff = datetime.fromtimestamp(ended_before, tz=timezone.utc).isoformat()
    ended: dict[str, float] = {}
    for run in hook.paged(path, "dag_runs", {"state": list(ENDED), "end_date_lte": cutoff}):
        end = run.get("end_date")
        if isinstance(run_id := run.get("dag_run_id"), str) and isinstance(end, str):
            ended[run_id] = datetime.fromisoformat(end).timestamp()
    active = {
        run_id
        for run in hook.paged(path, "dag_runs", {"state": list(ACTIVE)})
        if isinstance(run_id := run.get("dag_run_id"), str)
    }
    return RunStates(ended_at=ended, active=frozenset(active))
