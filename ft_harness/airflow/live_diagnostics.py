"""What a live Airflow tells a test that failed, or wants to look: task logs, component logs, a run's
task instances, the DAG processor's log, and the provider's CLI run beside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ft_harness.airflow.airflow_rest import format_task_instances
from ft_harness.airflow.live_environment import REPO_ROOT


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


class AirflowDiagnostics:
    """Part of ``LiveAirflow``: reads what its components and tasks wrote."""

    def task_log_files(self, dag_id: str, run_id: str | None = None) -> list[Path]:
        base = self.task_log_dir / f"dag_id={dag_id}"
        if run_id:
            base = base / f"run_id={run_id}"
        return sorted(base.rglob("*.log")) if base.exists() else []

    def provider_cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``airflow-ft ARGS`` (the provider's CLI) as an operator would run it beside this Airflow:
        with its environment (connections, store), in a process of its own."""
        return subprocess.run(
            [sys.executable, "-m", "airflow_ft_provider.cli", *args],
            env={
                **self.environment(),
                "PYTHONPATH": str(REPO_ROOT),
                "XDG_CACHE_HOME": str(self.home / "cache"),
            },
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def dag_processor_log(self, dag_file: str) -> str:
        """What the DAG processor logged while parsing ``dag_file`` (a file name in the DAGs folder) and
        running its DAG callbacks, oldest day first."""
        days = (self.task_log_dir / "dag_processor").glob("*")
        logs = sorted(log for day in days if not day.is_symlink() for log in day.glob(f"*/{dag_file}.log"))
        return "".join(path.read_text(errors="replace") for path in logs)

    def requeue_dag_file(self, dag_file: str) -> None:
        """Have the DAG processor parse ``dag_file`` again at its next refresh (within 5 s), with the DAG
        callbacks waiting for it. Airflow 3.3 leaves a callback that arrives while its file is being
        parsed pending until the file is queued again: ``min_file_process_interval`` (10 min here)."""
        (self.dags_folder / dag_file).touch()

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        """A try's log, as the API server serves it."""
        return self.client.task_log(dag_id, run_id, task_id, try_number, map_index=map_index)

    def describe_logs(self, tail: int = 30) -> str:
        parts = [f"AIRFLOW_HOME={self.home}  (API {self.base_url})"]
        for name, path in self.logs.items():
            proc = self.procs.get(name)
            rc = proc.poll() if proc else None
            parts.append(f"--- {name} log: {path} (exit code: {rc}) --- last {tail} lines:")
            parts.append(_tail(path, tail))
        return "\n".join(parts)

    def describe_run(self, dag_id: str, run_id: str) -> str:
        """Run state, task-instance table and task log file paths -- for assertion messages."""
        try:
            run = self.client.get_dag_run(dag_id, run_id)
            tis = self.client.task_instances(dag_id, run_id)
            head = f"run {dag_id}/{run_id}: {run['state']}\n{format_task_instances(tis)}"
        except Exception as e:  # noqa: BLE001  (the API may be the thing that broke)
            head = f"run {dag_id}/{run_id}: could not query the API: {e!r}"
        files = "\n".join(f"  {p}" for p in self.task_log_files(dag_id, run_id))
        return f"{head}\ntask logs:\n{files or '  (none)'}"
