#!/usr/bin/env bash
# The cluster scenarios (tests/cluster) on the reference distributed deployment: PostgreSQL, Redis,
# Airflow with CeleryExecutor and two workers, a Spark standalone cluster with a Spark Connect server,
# the S3 test endpoint (ft_harness/airflow/deployment.py), alone: scripts/test.sh runs them too, as its last
# session. About 8 minutes on 2 cores. Installs what it needs (as scripts/test.sh does); extra
# arguments go to pytest.
source "$(dirname "$0")/debian-packages.sh"
need_debs "postgresql=/usr/lib/postgresql/*/bin/postgres" "redis-server=redis-server" || exit 1
source "$(dirname "$0")/env.sh"
exec python -m pytest -p no:cacheprovider --durations=20 tests/cluster "$@"
