"""Experiment 3: a task defers itself with ``DateTimeTrigger`` until a given time, then resumes.

``defer_until`` pushes an XCom, defers until ``now + conf["defer_seconds"]`` (default 8 s) and, in
``resume``, records the time and the XCom it pushed before deferring (XComs are *not* cleared when a
task resumes from deferral).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import DAG, BaseOperator
from ft_e2e_common import process_info, record_ctx


class DeferUntilOperator(BaseOperator):
    def execute(self, context):
        seconds = float((context["dag_run"].conf or {}).get("defer_seconds", 8))
        target = datetime.now(timezone.utc) + timedelta(seconds=seconds)
        context["ti"].xcom_push(key="before_defer", value=target.isoformat())
        record_ctx(context, "defer_execute", target=target.isoformat(), **process_info())
        self.defer(
            trigger=DateTimeTrigger(moment=target),
            method_name="resume",
            kwargs={"target": target.isoformat()},
        )

    def resume(self, context, event=None, target=None):
        xcom = context["ti"].xcom_pull(task_ids=self.task_id, key="before_defer")
        record_ctx(
            context,
            "defer_resume",
            target=target,
            event=repr(event),
            xcom_before_defer=xcom,
            **process_info(),
        )
        return "resumed"


with DAG(dag_id="ft_e2e_defer", schedule=None, catchup=False, tags=["ft-e2e"]):
    DeferUntilOperator(task_id="defer_until")
