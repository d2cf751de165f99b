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
# The whole suite as two pytest sessions side by side on the 2 cores. The first runs everything that
# needs a live Airflow, a scheduler's timing or an event loop's (chaos, demo, e2e, examples, UI,
# sensors, triggers), or bounds a wall time (three files). The second -- unit, S3 and Spark tests,
# which time nothing -- runs at a low CPU priority (nice 10: about a tenth of a core while the first
# wants both), so it fills what the first leaves idle while its Airflow waits on the scheduler. Each
# has its own temporary directory; the second one's report follows the first's; either failing
# fails the suite.
TIMED=(tests/chaos tests/demo tests/e2e tests/examples tests/sensors tests/triggers tests/ui
       tests/unit/test_airflow_api_hook.py tests/unit/test_plugin_security.py tests/spark/test_connect_backend.py)
work=$(mktemp -d "${TMPDIR:-/tmp}/ft-tests.XXXXXX")
others_log="$work/others.log"
nice -n 10 python -m pytest -p no:cacheprovider --durations=15 --basetemp "$work/others" "${TIMED[@]/#/--ignore=}" \
    >"$others_log" 2>&1 &
others=$!
trap 'kill $others 2>/dev/null' INT TERM
echo ">> ${TIMED[*]} here; the other tests run alongside at low priority (report below)"
timed_rc=0
python -m pytest -p no:cacheprovider --durations=15 --basetemp "$work/timed" "${TIMED[@]}" || timed_rc=$?
others_rc=0
wait $others || others_rc=$?
echo
echo ">> the other tests (everything but ${TIMED[*]}):"
cat "$others_log"
echo ">> exit codes: ${TIMED[*]}: $timed_rc; the other tests: $others_rc"
[ $timed_rc -eq 0 ] && [ $others_rc -eq 0 ]
