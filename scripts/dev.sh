#!/usr/bin/env bash
# Local dev mode: your DAG folder in a local Airflow with the demo's S3 endpoint and Spark Connect
# server, up until Ctrl-C or SIGTERM. Usage: scripts/dev.sh --dags DIR [--airflow-home DIR]
source "$(dirname "$0")/env.sh"
exec python demo/dev.py "$@"
