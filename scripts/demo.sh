#!/usr/bin/env bash
# The demo. For now it shows the failover core's decisions for the example ETL pipeline.
source "$(dirname "$0")/env.sh"
exec python demo/core_walkthrough.py "$@"
