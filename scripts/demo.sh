#!/usr/bin/env bash
# The demo: a local S3 endpoint, local Spark and a local Airflow running the example pipelines; the
# orders ETL is run with an injected failure and a lost partition, then a recovery report is printed.
# The Airflow UI stays up until Ctrl-C. Non-interactive (CI / no terminal / --no-wait): exits after
# the report, with status 0 only if the recovery worked and the output matched a failure-free run.
source "$(dirname "$0")/env.sh"
exec python demo/run_demo.py "$@"
