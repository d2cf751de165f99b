"""Experiment 4: ``context["task_state_store"]`` survives retries and clears; XCom does not.

``stateful`` (retries=1) records what it sees in the task state store and in its own XCom, then
writes ``k<try_number>`` to both; try 1 fails. The test later clears it through the REST API and
checks what try 3 sees.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, task
from ft_e2e_common import record_ctx

KEYS = ("k1", "k2", "k3")

with DAG(dag_id="ft_e2e_state_store", schedule=None, catchup=False, tags=["ft-e2e"]):

    @task(retries=1, retry_delay=timedelta(seconds=1))
    def stateful(**context):
        ti = context["ti"]
        store = context["task_state_store"]
        seen_store = {k: store.get(k) for k in KEYS}
        seen_xcom = {k: ti.xcom_pull(task_ids=ti.task_id, key=k) for k in KEYS}
        record_ctx(
            context,
            "stateful_try",
            store=seen_store,
            xcom=seen_xcom,
            accessor=type(store).__module__ + "." + type(store).__qualname__,
        )
        key = f"k{ti.try_number}"
        store.set(key, {"written_by_try": ti.try_number})
        ti.xcom_push(key=key, value={"written_by_try": ti.try_number})
        if ti.try_number == 1:
            raise RuntimeError("ft-e2e: fail try 1 to force a retry")
        return ti.try_number

    stateful()
