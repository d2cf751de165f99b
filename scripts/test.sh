#!/usr/bin/env bash
# The whole test suite: unit, S3 (moto server), Spark (local + standalone cluster), live Airflow and
# browser tests. Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -k regions
# Debian packages the suite needs, installed (as root) when missing, alongside the Python packages:
# Chromium + ChromeDriver for the UI plugin's browser test, PostgreSQL for the live test Airflow.
debs=()
{ [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; } || debs+=(chromium chromium-driver)
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || debs+=(postgresql)
apt_pid=""
apt_log="$(mktemp "${TMPDIR:-/tmp}/ft-apt.XXXXXX")"
if [ ${#debs[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo ">> installing ${debs[*]} (Debian packages) while the Python packages install"
        ( export DEBIAN_FRONTEND=noninteractive
          apt-get install -y -q "${debs[@]}" || { apt-get update -q && apt-get install -y -q "${debs[@]}"; }
        ) >"$apt_log" 2>&1 &
        apt_pid=$!
    else
        echo ">> missing Debian packages: ${debs[*]} (install them as root: apt-get install ${debs[*]})" >&2
    fi
fi
source "$(dirname "$0")/env.sh"
wait_for_debs() {
    if [ -n "$apt_pid" ] && ! wait "$apt_pid"; then
        echo ">> apt-get install ${debs[*]} failed:" >&2
        tail -20 "$apt_log" >&2
    fi
}
if [ $# -gt 0 ]; then
    wait_for_debs
    exec python -m pytest "$@"
fi
# The whole suite as pytest sessions side by side on the 2 cores. The first runs everything that needs
# a live Airflow, a scheduler's timing or an event loop's (chaos, demo, e2e, examples, UI, sensors,
# triggers), or bounds a wall time (three files). The second -- unit, S3 and Spark tests, which time
# nothing -- runs at nice 10, so it fills what the first leaves idle while its Airflow waits on the
# scheduler. (nice ranks it only against the first pytest process: Linux schedules each session as one
# group, and every Airflow component and Spark server is a session of its own. A group of its own at
# nice 10 starved it in slow hours: README, Benchmarks, "Test suite".) The second ends a minute or two
# before the first, whose last tests then leave a core idle; so the timed tests that need no live
# Airflow (TAIL) run as a third session when the second ends, at normal priority, next to the first
# one's last live-Airflow tests. Each has its own temporary directory; the reports follow the first's;
# any failing fails the suite. The second starts before the Debian packages are in: it needs none.
TIMED=(tests/chaos tests/demo tests/e2e tests/examples tests/ui tests/spark/test_connect_backend.py)
TAIL=(tests/sensors tests/triggers tests/unit/test_airflow_api_hook.py tests/unit/test_plugin_security.py)
work=$(mktemp -d "${TMPDIR:-/tmp}/ft-tests.XXXXXX")
ignored=("${TIMED[@]/#/--ignore=}" "${TAIL[@]/#/--ignore=}")
(
    trap 'kill $session 2>/dev/null; exit 143' INT TERM
    rc=0
    nice -n 10 python -m pytest -p no:cacheprovider --durations=15 --basetemp "$work/others" "${ignored[@]}" \
        >"$work/others.log" 2>&1 & session=$!
    wait $session || rc=1
    python -m pytest -p no:cacheprovider --durations=15 --basetemp "$work/tail" "${TAIL[@]}" \
        >"$work/tail.log" 2>&1 & session=$!
    wait $session || rc=1
    exit $rc
) &
others=$!
trap 'kill $others 2>/dev/null' INT TERM
wait_for_debs  # only the first session needs them (PostgreSQL, Chromium): the second has started
echo ">> ${TIMED[*]} here; the other tests run alongside at low priority, then ${TAIL[*]} (reports below)"
timed_rc=0
python -m pytest -p no:cacheprovider --durations=15 --basetemp "$work/timed" "${TIMED[@]}" || timed_rc=$?
others_rc=0
wait $others || others_rc=$?
echo
echo ">> the other tests (everything but ${TIMED[*]} ${TAIL[*]}):"
cat "$work/others.log"
echo
echo ">> then ${TAIL[*]}:"
cat "$work/tail.log" 2>/dev/null
echo ">> exit codes: ${TIMED[*]}: $timed_rc; the other tests, then ${TAIL[*]}: $others_rc" \
     "(the whole suite, install included: $((SECONDS / 60)) min $((SECONDS % 60)) s)"
[ $timed_rc -eq 0 ] && [ $others_rc -eq 0 ]
