"""The Airflow UI plugin: a failover page per DAG run and its restart-region action."""
