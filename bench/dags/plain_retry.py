"""Airflow's own retry, for comparison: a plain task that fails on its first try (retries=1, no delay)."""

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

with DAG("ft_bench_plain_retry", schedule=None, start_date=datetime(2026, 1, 1)):

    @task(retries=1, retry_delay=timedelta(0))
    def flaky(ti=None):
        if ti.try_number == 1:
            raise RuntimeError("first try fails")

    flaky()
