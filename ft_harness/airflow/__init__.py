"""A running Airflow for tests and benchmarks: the live LocalExecutor Airflow, the Celery deployment, the
reference distributed deployment, its REST client, and ``dag.test()`` runs in forks."""
