"""The Airflow RetryPolicy of every pipeline stage: a failure a restart cannot heal fails at once
(``recovery/failure_facts.py``); otherwise Flink's restart strategy decides retry-or-fail and the exact
delay, and the region failover restarts the other tasks that must run again."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import RetryDecision, RetryPolicy

from airflow_ft_provider.failover.classification import FailureKind, FailureLabels
from airflow_ft_provider.failover.durations import representable
from airflow_ft_provider.recovery.layered_restarts import unrecorded_retry

if TYPE_CHECKING:
    from airflow.sdk import Context

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
        labels = stage_labels(context, ti.task_id, exception)
        try:
            decision = RunRecovery.for_worker(context).handle_failure(
                ti.task_id, map_index, try_number, exception, labels=labels
            )
        except Exception as err:  # never let recovery bookkeeping turn a retryable failure into a crash
            if labels is not None and not labels.recoverable:
                log.exception("region failover could not record this failure (%s)", err)
                return RetryDecision.fail(reason=f"not recoverable: {labels.reason}")
            log.exception("region failover could not record this failure (%s); the next try will", err)
            return unrecorded_retry(try_number, err)
        if not decision.restart:
            return RetryDecision.fail(reason=decision_reason(decision))
        # Held to a date Airflow can schedule: a delay of a million days waits, it does not overflow.
        now = time.time()
        delay = min(decision.delay, representable(now + decision.delay) - now)
        return RetryDecision.retry(delay=timedelta(seconds=delay), reason=decision_reason(decision))

    def serialize(self) -> dict[str, object]:
        return {}

    @classmethod
    def deserialize(cls, data: dict[str, object]) -> FailoverRetryPolicy:
        return cls()


def stage_labels(context: Context, task_id: str, failure: BaseException) -> FailureLabels | None:
    """The failure's classification with its stage's rules (the pipeline this worker parsed); None,
    and the failure counts as recoverable, when the rules cannot be applied."""
    from airflow_ft_provider.model.parsed import attached

    try:
        pipeline = attached(context["dag"])
        return pipeline.failure_labels(task_id, failure) if pipeline is not None else None
    except Exception as err:  # noqa: BLE001 - classification never hides the failure itself
        log.warning("could not classify the failure of %s (%s): treating it as recoverable", task_id, err)
        return None


def record_failure_without_retry(context: Context, failure: BaseException) -> None:
    """Airflow fails a try that raised ``AirflowFailException`` without asking the retry policy: its
    decision (not recoverable, no restart) is recorded here, so the failover page and ``history`` say
    why the run stopped."""
    from airflow_ft_provider.recovery.run_recovery import RunRecovery

    ti = context["ti"]
    map_index = ti.map_index if ti.map_index is not None and ti.map_index >= 0 else None
    labels = stage_labels(context, ti.task_id, failure)
    if labels is None or labels.recoverable:
        kind = labels.kind if labels else FailureKind.USER_CODE
        labels = FailureLabels(False, kind, None, "AirflowFailException: Airflow does not retry it")
    try:
        RunRecovery.for_worker(context).handle_failure(
            ti.task_id, map_index, ti.try_number, failure, labels=labels
        )
    except Exception as err:  # noqa: BLE001 - the failure itself is what the task reports
        log.warning("region failover could not record this failure (%s)", err)
