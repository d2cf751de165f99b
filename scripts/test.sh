#!/usr/bin/env bash
# The whole test suite: unit, S3 (moto server), Spark (local + standalone cluster) and live Airflow tests.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -k regions
source "$(dirname "$0")/env.sh"
exec python -m pytest "$@"
