"""The Airflow RetryPolicy of every pipeline stage: Flink's restart strategy decides retry-or-fail and
the exact delay, and the region failover restarts the other tasks that must run again."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import RetryDecision, RetryPolicy

log = logging.getLogger(__name__)

# When the recovery journal cannot be reached the failure stays unhandled; the next try handles it in
# before_work (as after a killed process), so retry soon rather than guess a decision.
UNRECORDED_RETRY_DELAY = timedelta(seconds=5)


class FailoverRetryPolicy(RetryPolicy):
    def evaluate(
        self, exception: BaseException, try_number: int, max_tries: int, context: Any = None
    ) -> RetryDecision:
        from airflow_ft_provider.pipeline import pipeline_for

        ti = context["ti"]
        map_index = ti.map_index if ti.map_index is not None and ti.map_index >= 0 else None
        try:
            failover = pipeline_for(ti.dag_id).description.region_failover(ti.run_id)
            decision = failover.handle_failure(ti.task_id, map_index, try_number, exception)
        except Exception as err:  # never let recovery bookkeeping turn a retryable failure into a crash
            log.exception("region failover could not record this failure (%s); the next try will", err)
            return RetryDecision.retry(delay=UNRECORDED_RETRY_DELAY, reason=f"failover not recorded: {err}")
        if not decision.restart:
            return RetryDecision.fail(reason=decision.reason)
        return RetryDecision.retry(delay=timedelta(seconds=decision.delay), reason=decision.reason)

    def serialize(self) -> dict[str, Any]:
        return {}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> FailoverRetryPolicy:
        return cls()
