"""Experiment 6: in which task-instance state do ``on_retry_callback`` / ``on_failure_callback`` run?

``fail_twice`` (retries=1) fails on both tries: try 1 -> ``on_retry_callback``, try 2 ->
``on_failure_callback``. Each callback asks the public REST API for its own task instance's state and
records it (plus the state on the context's ``ti`` and the process it runs in).
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, task
from ft_e2e_common import callback_recorder, record_ctx

with DAG(dag_id="ft_e2e_callbacks", schedule=None, catchup=False, tags=["ft-e2e"]):

    @task(
        retries=1,
        retry_delay=timedelta(seconds=2),
        on_retry_callback=callback_recorder("on_retry"),
        on_failure_callback=callback_recorder("on_failure"),
    )
    def fail_twice(**context):
        record_ctx(context, "fail_twice_try")
        raise RuntimeError(f"ft-e2e: failure on try {context['ti'].try_number}")

    fail_twice()
