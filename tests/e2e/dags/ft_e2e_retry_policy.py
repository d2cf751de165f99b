"""Experiment 1: a custom ``airflow.sdk.RetryPolicy`` decides the retry delay / fails the task.

* ``policy_delay``: try 1 raises; the policy answers ``RetryDecision.retry(delay=POLICY_DELAY)``
  although ``retry_delay`` is 10 minutes; try 2 succeeds.
* ``policy_fail``: the policy answers ``RetryDecision.fail(reason)`` although 3 retries are left.
* ``policy_capped``: the policy always says retry, but ``retries=1`` caps it: try 2 ends FAILED.

Every ``evaluate()`` call is recorded (arguments and process) in the scratch directory.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, RetryDecision, RetryPolicy, task
from ft_e2e_common import process_info, record, record_ctx

POLICY_DELAY = timedelta(seconds=8)
FAIL_REASON = "ft-e2e: fatal error, the policy refuses to retry"


class RecordingPolicy(RetryPolicy):
    """Records each evaluation, then retries with ``delay`` or fails with ``fail_reason``."""

    def __init__(self, *, delay: timedelta | None = None, fail_reason: str | None = None):
        self.delay = delay
        self.fail_reason = fail_reason

    def evaluate(self, exception, try_number, max_tries, context=None):
        ti = context["ti"] if context else None
        if ti is not None:
            record(
                ti.dag_id,
                ti.run_id,
                "policy_evaluate",
                task_id=ti.task_id,
                exception_type=type(exception).__name__,
                exception=str(exception),
                try_number=try_number,
                max_tries=max_tries,
                context_is_none=context is None,
                **process_info(),
            )
        if self.fail_reason:
            return RetryDecision.fail(self.fail_reason)
        return RetryDecision.retry(delay=self.delay, reason=f"ft-e2e policy retry after {self.delay}")


with DAG(
    dag_id="ft_e2e_retry_policy",
    schedule=None,
    catchup=False,
    tags=["ft-e2e"],
):

    @task(retries=2, retry_delay=timedelta(minutes=10), retry_policy=RecordingPolicy(delay=POLICY_DELAY))
    def policy_delay(**context):
        record_ctx(context, "policy_delay_try")
        if context["ti"].try_number == 1:
            raise RuntimeError("ft-e2e: transient failure on try 1")
        return "ok"

    @task(retries=3, retry_delay=timedelta(seconds=1), retry_policy=RecordingPolicy(fail_reason=FAIL_REASON))
    def policy_fail(**context):
        record_ctx(context, "policy_fail_try")
        raise ValueError("ft-e2e: fatal failure")

    @task(
        retries=1, retry_delay=timedelta(minutes=10), retry_policy=RecordingPolicy(delay=timedelta(seconds=1))
    )
    def policy_capped(**context):
        record_ctx(context, "policy_capped_try")
        raise RuntimeError(f"ft-e2e: failure on try {context['ti'].try_number}")

    policy_delay()
    policy_fail()
    policy_capped()
