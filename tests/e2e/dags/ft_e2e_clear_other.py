"""Experiment 2: a running task clears *other* task instances of its run through the public REST API.

* ``mapped_target`` (3 map indices) -> ``after_target`` (downstream) record every try.
* ``long_runner`` sleeps on its first try (until cleared while RUNNING) and records ``on_kill``.
* ``clearer`` (independent) waits until ``after_target`` succeeded and ``long_runner`` runs, then, with
  credentials from the ``airflow_api`` connection:
  1. clears ``("mapped_target", 1)`` with ``include_downstream = conf["include_downstream"]``;
  2. clears the RUNNING ``long_runner`` and records the state it has right after the call.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from airflow.sdk import DAG, BaseOperator, task
from ft_e2e_common import api_client, callback_recorder, process_info, read_records, record_ctx


class LongRunner(BaseOperator):
    """First execution sleeps (to be cleared while running); later ones return at once."""

    def execute(self, context):
        ti = context["ti"]
        first = not read_records(ti.dag_id, ti.run_id, "long_runner_try")
        record_ctx(context, "long_runner_try", first=first, **process_info())
        if first:
            time.sleep(600)
        return "done"

    def on_kill(self):
        from airflow.sdk import get_current_context

        record_ctx(get_current_context(), "long_runner_on_kill", **process_info())


with DAG(dag_id="ft_e2e_clear_other", schedule=None, catchup=False, tags=["ft-e2e"]):

    @task
    def mapped_target(i, **context):
        record_ctx(context, "mapped_target_try", i=i)
        return i

    @task
    def after_target(values, **context):
        record_ctx(context, "after_target_try", values=list(values))

    @task
    def clearer(**context):
        ti = context["ti"]
        dag_id, run_id = ti.dag_id, ti.run_id
        include_downstream = bool((context["dag_run"].conf or {}).get("include_downstream", False))
        with api_client() as api:
            api.wait_for_task_instance(dag_id, run_id, "after_target", states=["success"], timeout=180)
            api.wait_for_task_instance(dag_id, run_id, "long_runner", states=["running"], timeout=180)
            before = {
                (t["task_id"], t["map_index"]): (t["state"], t["try_number"], t["max_tries"])
                for t in api.task_instances(dag_id, run_id)
            }

            t0 = datetime.now(timezone.utc)
            cleared = api.clear_task_instances(
                dag_id, run_id, [("mapped_target", 1)], include_downstream=include_downstream
            )
            t1 = datetime.now(timezone.utc)
            record_ctx(
                context,
                "clear_mapped",
                include_downstream=include_downstream,
                called_at=t0.isoformat(),
                returned_at=t1.isoformat(),
                cleared=[[c["task_id"], c["map_index"], c["state"], c["try_number"]] for c in cleared],
                before={f"{k[0]}[{k[1]}]": v for k, v in before.items()},
            )

            t2 = datetime.now(timezone.utc)
            cleared_lr = api.clear_task_instances(dag_id, run_id, ["long_runner"])
            lr_right_after = api.task_instance(dag_id, run_id, "long_runner")
            record_ctx(
                context,
                "clear_running",
                called_at=t2.isoformat(),
                cleared=[[c["task_id"], c["map_index"], c["state"], c["try_number"]] for c in cleared_lr],
                state_right_after=lr_right_after["state"],
                try_right_after=lr_right_after["try_number"],
                max_tries_right_after=lr_right_after["max_tries"],
            )

    long_runner = LongRunner(
        task_id="long_runner",
        retries=2,
        on_failure_callback=callback_recorder("long_runner_on_failure"),
        on_retry_callback=callback_recorder("long_runner_on_retry"),
    )
    after_target(mapped_target.expand(i=[0, 1, 2]))
    clearer()
