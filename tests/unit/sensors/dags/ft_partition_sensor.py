"""Test DAG for PartitionSensor's deferral path (run with dag.test() by tests/unit/sensors/).

    produce --(commits 'orders' in the background, DELAY s later)--> wait (deferrable) --> wait_never

``produce`` returns at once and commits from a thread, so that ``wait``'s first poke finds nothing,
it defers to PartitionTrigger (dag.test() runs the trigger inline) and the trigger sees the commit.
``wait_never`` waits for a partition nobody commits and must time out.
"""

import os
import threading
import time
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_ft_provider.sensors.partition import PartitionSensor

STORE = os.environ["FT_TEST_STORE_URL"]
DELAY = 5.0

with DAG("ft_partition_sensor", schedule=None, start_date=datetime(2026, 1, 1)):

    @task
    def produce(dag_run=None):
        from airflow_ft_provider.hooks.partition_store import PartitionStoreHook
        from airflow_ft_provider.partitions import Producer, RunRef, commit_table

        store = PartitionStoreHook(url=STORE).get_store()
        ref = RunRef(dag_run.dag_id, dag_run.run_id).parse("orders")
        rows = [{"order_id": n, "amount": n * 1.5} for n in range(3)]

        def commit_later():
            time.sleep(DELAY)
            commit_table(store, ref, rows, producer=Producer("produce", -1, 1))
            print(f"committed {ref} in the background")

        threading.Thread(target=commit_later, name="commit-later").start()

    wait = PartitionSensor(
        task_id="wait",
        partitions=["orders"],
        run_id="{{ run_id }}",  # templated (the default would be the same run)
        store_url=STORE,
        deferrable=True,
        poke_interval=1,
        timeout=120,
    )
    wait_never = PartitionSensor(
        task_id="wait_never", partitions="never", store_url=STORE, deferrable=True, poke_interval=1, timeout=3
    )
    produce() >> wait >> wait_never
