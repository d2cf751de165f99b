"""The Airflow RetryPolicy of every pipeline stage: Flink's restart strategy decides retry-or-fail and
the exact delay, and the region failover restarts the other tasks that must run again."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import RetryDecision, RetryPolicy

from airflow_ft_provider.recovery.restart_settings import unrecorded_retry

log = logging.getLogger(__name__)


class FailoverRetryPolicy(RetryPolicy):
    def evaluate(
        self, exception: BaseException, try_number: int, max_tries: int, context: Any = None
    ) -> RetryDecision:
        # Imported here: a DAG parse installs this policy but needs none of the recovery machinery.
        from airflow_ft_provider.recovery.run_recovery import RunRecovery
        from airflow_ft_provider.recovery.wording import decision_reason

        ti = context["ti"]
        map_index = ti.map_index if ti.map_index is not None and ti.map_index >= 0 else None
        try:
            decision = RunRecovery.for_worker(context).handle_failure(
                ti.task_id, map_index, try_number, exception
            )
        except Exception as err:  # never let recovery bookkeeping turn a retryable failure into a crash
            log.exception("region failover could not record this failure (%s); the next try will", err)
            return unrecorded_retry(try_number, err)
        if not decision.restart:
            return RetryDecision.fail(reason=decision_reason(decision))
        return RetryDecision.retry(delay=timedelta(seconds=decision.delay), reason=decision_reason(decision))

    def serialize(self) -> dict[str, Any]:
        return {}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> FailoverRetryPolicy:
        return cls()
