"""The test harness: a live Airflow (PostgreSQL or SQLite), an S3 endpoint (moto server), Spark (local,
standalone cluster, Spark Connect), the Airflow REST client of tests and tools, chaos and scenario
helpers. The test suite, the demo and the benchmarks import it; the provider package never does.
Its pytest fixtures are registered by ``tests/conftest.py``.
"""
