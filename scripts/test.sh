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
if [ $# -gt 0 ]; then
    exec python -m pytest "$@"
fi
# The whole suite as two pytest sessions side by side (2 cores): the live-Airflow tests spend much of
# their time waiting on the scheduler, the others (unit, S3, Spark) fill that time. Each session has its
# own temporary directory; the second one's report follows the first's.
LIVE=(tests/chaos tests/demo tests/e2e tests/examples tests/ui)
work=$(mktemp -d "${TMPDIR:-/tmp}/ft-tests.XXXXXX")
others_log="$work/others.log"
python -m pytest -p no:cacheprovider --basetemp "$work/others" "${LIVE[@]/#/--ignore=}" >"$others_log" 2>&1 &
others=$!
trap 'kill $others 2>/dev/null' INT TERM
echo ">> live-Airflow tests (${LIVE[*]}) here; the other tests run alongside (report below)"
python -m pytest -p no:cacheprovider --basetemp "$work/live" "${LIVE[@]}"
live_rc=$?
wait $others
others_rc=$?
echo
echo ">> the other tests (everything but ${LIVE[*]}):"
cat "$others_log"
echo ">> live-Airflow tests: exit $live_rc; other tests: exit $others_rc"
[ $live_rc -eq 0 ] && [ $others_rc -eq 0 ]
