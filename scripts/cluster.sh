#!/usr/bin/env bash
# Start the reference distributed deployment on this machine and keep it running until Ctrl-C:
# PostgreSQL, Redis, Airflow 3.3 (CeleryExecutor, two workers), a Spark standalone cluster (master, two
# workers) with a Spark Connect server, an S3 endpoint (moto). Prints where each part is. Arguments:
# DAG folders (default: dags_examples/). See README, "Running on a cluster".
source "$(dirname "$0")/debian-packages.sh"
need_debs "postgresql=/usr/lib/postgresql/*/bin/postgres" "redis-server=redis-server" || exit 1
source "$(dirname "$0")/env.sh"
exec python -m ft_harness.airflow.deployment "$@"
