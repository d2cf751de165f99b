#!/usr/bin/env bash
# The whole test suite: unit, S3 (moto server), Spark (local + standalone cluster), live Airflow and
# browser tests. Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -k regions
source "$(dirname "$0")/env.sh"
# The UI plugin's browser test drives Debian's headless Chromium; install it when missing (as root).
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo ">> installing chromium and chromium-driver (browser test of the UI plugin)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null \
            || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null; }
    else
        echo ">> /usr/bin/chromium or /usr/bin/chromedriver missing: install Debian's chromium and chromium-driver" >&2
    fi
fi
exec python -m pytest "$@"
