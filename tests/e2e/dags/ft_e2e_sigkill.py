"""Experiment 5: what happens when a task's process is SIGKILLed mid-run?

Both tasks write their PIDs (task runner = ``os.getpid()``, supervisor = ``os.getppid()``) to the
scratch directory on try 1 and then sleep; the test kills them:

* ``killed_task``: only the task-runner process is killed (OOM killer style); the supervisor lives.
* ``killed_worker``: supervisor *and* task runner are killed (a lost worker): nobody heartbeats.

Try 2 succeeds at once. The retry policy and both callbacks record every call, so the test can tell
whether (and in which process) they ran.
"""

from __future__ import annotations

import time
from datetime import timedelta

from airflow.sdk import DAG, RetryDecision, RetryPolicy, task
from ft_e2e_common import callback_recorder, process_info, record, record_ctx


class RecordingPolicy(RetryPolicy):
    def evaluate(self, exception, try_number, max_tries, context=None):
        ti = context["ti"] if context else None
        if ti is not None:
            record(
                ti.dag_id,
                ti.run_id,
                "policy_evaluate",
                task_id=ti.task_id,
                try_number=try_number,
                exception=repr(exception),
                **process_info(),
            )
        return RetryDecision.retry(delay=timedelta(seconds=1), reason="ft-e2e sigkill policy")


def _sleeper(name: str):
    @task(
        task_id=name,
        retries=1,
        # long enough for the test (polling every 0.25 s) to see UP_FOR_RETRY on a loaded machine: with 3 s
        # a CI run once saw SCHEDULED first
        retry_delay=timedelta(seconds=10),
        retry_policy=RecordingPolicy(),
        on_retry_callback=callback_recorder(f"{name}_on_retry"),
        on_failure_callback=callback_recorder(f"{name}_on_failure"),
    )
    def _run(**context):
        info = process_info()
        record_ctx(context, f"{name}_try", **info)
        if context["ti"].try_number == 1:
            time.sleep(600)  # killed by the test long before this ends
        return "ok"

    return _run()


with DAG(dag_id="ft_e2e_sigkill", schedule=None, catchup=False, tags=["ft-e2e"]):
    _sleeper("killed_task")
    _sleeper("killed_worker")
