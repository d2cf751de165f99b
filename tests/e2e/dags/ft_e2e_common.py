"""Helpers shared by the end-to-end test DAGs and the tests that drive them.

The test DAGs record what they observe (try numbers, timings, the state a callback sees, ...) as JSON
lines in the scratch directory shared with the test process: ``$FT_LIVE_AIRFLOW_SCRATCH`` (set by the
live-Airflow fixture), one directory per DAG run. The tests read the same files with
:func:`read_records`. This module imports nothing from Airflow at module level.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any


def scratch_root() -> Path:
    return Path(os.environ.get("FT_LIVE_AIRFLOW_SCRATCH", "/tmp/ft-e2e-scratch"))


def run_dir(dag_id: str, run_id: str, root: Path | None = None) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)
    return (root or scratch_root()) / dag_id / safe


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def process_info() -> dict[str, Any]:
    """Who is running this code: pid, parent, process titles, and which Airflow component it is.

    ``where`` is ``"task_runner"`` (the forked task process, title ``airflow worker -- <ti id>``),
    ``"dag_processor"`` (callbacks requested by the scheduler run there) or ``"other"``.
    """
    proc = _cmdline(os.getpid())
    if proc.startswith("airflow worker --") and "LocalExecutor" not in proc:
        where = "task_runner"
    elif "dag-processor" in proc or "dag_processor" in proc:
        where = "dag_processor"
    else:
        where = "other"
    return {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "proc": proc[:200],
        "parent_proc": _cmdline(os.getppid())[:200],
        "where": where,
    }


def record(dag_id: str, run_id: str, name: str, **data: Any) -> dict[str, Any]:
    """Append one JSON record to ``<scratch>/<dag_id>/<run_id>/<name>.jsonl`` and return it."""
    d = run_dir(dag_id, run_id)
    d.mkdir(parents=True, exist_ok=True)
    rec = {"t": time.time(), **data}
    with open(d / f"{name}.jsonl", "a") as f:
        f.write(json.dumps(rec, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return rec


def record_ctx(context: Any, name: str, **data: Any) -> dict[str, Any]:
    ti = context["ti"]
    return record(
        ti.dag_id,
        ti.run_id,
        name,
        task_id=ti.task_id,
        map_index=ti.map_index,
        try_number=ti.try_number,
        **data,
    )


def read_records(dag_id: str, run_id: str, name: str, root: Path | None = None) -> list[dict[str, Any]]:
    path = run_dir(dag_id, run_id, root) / f"{name}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for_records(
    dag_id: str, run_id: str, name: str, *, count: int = 1, timeout: float = 60.0, root: Path | None = None
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        recs = read_records(dag_id, run_id, name, root)
        if len(recs) >= count:
            return recs
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(recs)} of {count} {name!r} records for {dag_id}/{run_id}")
        time.sleep(0.25)


def api_client():
    """REST client built from the ``airflow_api`` connection (provided by the fixture)."""
    from ft_harness.airflow.airflow_rest import AirflowRestClient

    return AirflowRestClient.from_connection("airflow_api")


def observed_ti_state(context: Any) -> dict[str, Any]:
    """The task instance's state and try number as the public REST API reports them right now."""
    ti = context["ti"]
    try:
        with api_client() as api:
            rest = api.task_instance(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
        return {"rest_state": rest["state"], "rest_try_number": rest["try_number"]}
    except Exception as e:  # noqa: BLE001  (recorded, so the test shows what went wrong)
        return {"rest_error": repr(e)}


def callback_recorder(name: str):
    """A task callback that records the REST-observed TI state and where it runs."""

    def _callback(context: Any) -> None:
        ti = context["ti"]
        record_ctx(
            context,
            name,
            context_ti_state=str(getattr(ti, "state", None)),
            exception=repr(context.get("exception")),
            **observed_ti_state(context),
            **process_info(),
        )

    _callback.__name__ = f"record_{name}"
    return _callback
