"""The test harness, one package per job. The test suite, the demo and the benchmarks import it; the
provider package never does. Its pytest fixtures are registered by ``tests/conftest.py``.

    services/  what the tests run against: the S3 endpoint (moto server) and proxies, PostgreSQL, Redis,
               StatsD, Spark (local, standalone, Connect) and the Spark host of its own
    airflow/   a running Airflow: LocalExecutor, the Celery deployment, the reference distributed
               deployment, the REST client, dag.test() in forks
    chaos/     chaos and scenario runs, and the example pipeline's expected output
    runners/   processes the tests start and stop or kill (the demo, a commit or checkpoint held at a step)
    data/      what tests write to and read from the partition store
"""
