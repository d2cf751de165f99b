"""Whose processes are a live Airflow's: every component starts a session of its own, and its children
(executor workers, task processes in their own process groups, orphans) keep that session id. Killing a
component's session is how tests crash one; the teardown ends every process the instance started."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ft_harness.airflow.live_environment import MARKER_ENV


class ComponentSessions:
    """Part of ``LiveAirflow``: its components' sessions, their kill and the instance's teardown."""

    def kill_session(self, name: str, sig: int = signal.SIGKILL) -> list[int]:
        """Send ``sig`` to every process of a component's session (it and all it started); wait for the
        component's own process. Returns the pids signalled."""
        proc = self.procs[name]
        self._former_sessions.add(proc.pid)  # whatever escapes the kill stays ours, for the teardown
        pids = [pid for pid in self._pids() if self._session_of(pid) == proc.pid]
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        return pids

    @staticmethod
    def _pids() -> list[int]:
        return [
            int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and int(e.name) != os.getpid()
        ]

    @staticmethod
    def _session_of(pid: int) -> int | None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        # "pid (comm) state ppid pgrp session ..." -- comm may contain spaces/parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        return int(fields[3])

    def _session_ids(self) -> set[int]:
        return {p.pid for p in self.procs.values()} | self._former_sessions

    def owns_pid(self, pid: int) -> bool:
        """Whether ``pid`` belongs to this instance (any component, worker, task or orphan of them).

        Every component is started in a new session; its children (LocalExecutor workers,
        supervisors, task processes -- which get their own process *group* -- and the DAG
        processor's parsers) keep that session id, even when orphaned. The marker variable
        ``FT_LIVE_AIRFLOW_INSTANCE`` is not reliable: ``setproctitle`` overwrites
        ``/proc/<pid>/environ`` of the processes that set a title.
        """
        return self._session_of(pid) in self._session_ids()

    def _owned_pids(self) -> list[int]:
        """PIDs of all live processes of this instance (by session id or env marker)."""
        sessions = self._session_ids()
        needle = f"{MARKER_ENV}={self.instance_id}".encode()
        pids = []
        for pid in self._pids():
            if self._session_of(pid) in sessions:
                pids.append(pid)
                continue
            try:
                if needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    pids.append(pid)
            except OSError:
                continue
        return pids

    def stop(self, grace: float = 5.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._client is not None:
            self._client.close()
        # SIGTERM each component's process group (graceful), then SIGKILL whatever is left --
        # including task processes in their own groups and orphans (found by the env marker).
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for _ in range(3):
            pids = self._owned_pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self._own_home and not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)
