#!/usr/bin/env bash
# The whole test suite: unit, S3 (moto server), Spark (local + standalone cluster), live Airflow,
# browser tests and every scenario on the distributed deployment (Celery, PostgreSQL, Redis): nothing
# deselected. Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -k regions.
# scripts/test.sh --fast: the fast lane for daily work (unit tests, the core, the store against the S3
# test endpoint; about 2-3 minutes), no Debian packages needed.
# Debian packages the suite needs, installed (as root) when missing, alongside the Python packages:
# Chromium + ChromeDriver for the UI plugin's browser test, PostgreSQL for the live test Airflow and
# the deployment, Redis for the deployment's Celery broker.
# Without them the tests that need them fail, saying what to install.
if [ "${1:-}" = "--fast" ]; then
    shift
    source "$(dirname "$0")/env.sh"
    exec python -m pytest -p no:cacheprovider tests/unit -m "not spark" \
        --ignore=tests/unit/sensors --ignore=tests/unit/triggers "$@"
fi
source "$(dirname "$0")/debian-packages.sh"
missing_debs "chromium=/usr/bin/chromium" "chromium-driver=/usr/bin/chromedriver" \
    "postgresql=/usr/lib/postgresql/*/bin/postgres" "redis-server=redis-server"
start_debs_install "${MISSING_DEBS[@]}" || true
source "$(dirname "$0")/env.sh"
echo ">> Python environment ready after ${SECONDS} s"
if [ $# -gt 0 ]; then
    wait_for_debs || true
    exec python -m pytest "$@"
fi
# The whole suite as pytest sessions side by side on the 2 cores:
# * TIMED needs a live Airflow or a Spark server's timing (chaos, demo, e2e, examples, UI), at normal
#   priority in the foreground. It is the longest.
# * The untimed tests -- S3 first, then Spark and unit tests -- run one after the other at nice 10, so
#   they fill what TIMED leaves idle while its Airflow waits on the scheduler. (nice ranks them only
#   against TIMED's pytest process: Linux schedules each session as one group, and every Airflow
#   component and Spark server is a session of its own. A group of its own at nice 10 starved them in
#   slow hours: README, Benchmarks, "Test suite".)
# * WAITING -- the tests that bound a wall time or need an event loop's timing but no live Airflow
#   (sensors, triggers, three unit files; test_stream_start needs a Python process to start within
#   Spark's 10 s, which the cluster deployments' start-up storm denied it at nice 10) -- mostly wait. At normal priority, they start when the S3 tests
#   end and run next to the other two, instead of adding their waits to either.
# * CLUSTER -- the scenarios on the reference distributed deployment (tests/cluster: PostgreSQL, Redis,
#   CeleryExecutor with two workers, a Spark standalone cluster with a Spark Connect server) -- starts
#   when TIMED ends, at normal priority, beside what is left of the untimed tests at nice 10: its
#   scenarios mostly wait (restart backoffs, heartbeat timeouts, an API outage), and their timing
#   bounds have 30 s of slack. It runs as two sessions side by side, each with a deployment of its
#   own (CLUSTER_A's modules, then the others): one after the other they took 20-23 of the suite's
#   36-39 minutes, mostly waiting.
# Each session has its own temporary directory, its report follows TIMED's, and any failing fails the
# suite. The untimed tests start before the Debian packages are in: they need none.
TIMED=(tests/chaos tests/demo tests/e2e tests/examples tests/ui tests/unit/execution/test_connect.py)
WAITING=(tests/unit/sensors tests/unit/triggers tests/unit/hooks/test_airflow_api.py
    tests/unit/plugins/test_app_security.py tests/unit/spark/test_stream_start.py)
# The S3 session: the tests of tests/unit whose marker says they need the S3 endpoint and nothing
# else; the rest session takes every other test of tests/unit (the two markers' expressions are
# complements, so each test runs in exactly one session).
S3_ONLY="s3 and not spark and not airflow"
CLUSTER=(tests/cluster)
CLUSTER_A=(tests/cluster/test_infrastructure_loss.py tests/cluster/test_run_time_mapping_on_celery.py)
work=$(mktemp -d "${TMPDIR:-/tmp}/ft-tests.XXXXXX")
start() {  # start NAME NICENESS ARGS...: pytest in the background ($!), its own temporary directory and log
    local name=$1 niceness=$2; shift 2
    nice -n "$niceness" python -m pytest -p no:cacheprovider --durations=15 --basetemp "$work/$name" "$@" \
        >"$work/$name.log" 2>&1 &
}
(
    s3="" waiting="" rest="" rc=0
    trap 'kill $s3 $waiting $rest 2>/dev/null; exit 143' INT TERM
    start s3 10 tests/unit -m "$S3_ONLY" "${WAITING[@]/#/--ignore=}" "${TIMED[@]/#/--ignore=}"; s3=$!
    wait $s3 || rc=1
    start waiting 0 "${WAITING[@]}"; waiting=$!
    start rest 10 -m "not ($S3_ONLY)" "${TIMED[@]/#/--ignore=}" "${WAITING[@]/#/--ignore=}" \
        "${CLUSTER[@]/#/--ignore=}"; rest=$!
    wait $rest || rc=1
    wait $waiting || rc=1
    exit $rc
) &
untimed=$!
trap 'kill $untimed 2>/dev/null' INT TERM
wait_for_debs || true  # only TIMED needs them (PostgreSQL, Chromium): the others have started
echo ">> ${SECONDS} s: ${TIMED[*]} here; the others run alongside: tests/unit -m \"$S3_ONLY\", then the rest at low priority and ${WAITING[*]} (reports below)"
timed_rc=0
python -m pytest -p no:cacheprovider --durations=15 --basetemp "$work/timed" "${TIMED[@]}" || timed_rc=$?
echo ">> $((SECONDS / 60)) min $((SECONDS % 60)) s: ${CLUSTER[*]} (the reference distributed deployment)," \
     "beside what is left of the others"
start cluster-a 0 "${CLUSTER_A[@]}"; cluster_a=$!
start cluster-b 0 "${CLUSTER[@]}" "${CLUSTER_A[@]/#/--ignore=}"; cluster_b=$!
trap 'kill $untimed $cluster_a $cluster_b 2>/dev/null' INT TERM
cluster_rc=0
wait $cluster_a || cluster_rc=$?
wait $cluster_b || cluster_rc=$?
untimed_rc=0
wait $untimed || untimed_rc=$?
for name in cluster-a cluster-b s3 rest waiting; do
    echo
    echo ">> session $name:"
    cat "$work/$name.log" 2>/dev/null || echo "(no report: the session did not start)"
done
if [ $timed_rc -eq 0 ] && [ $untimed_rc -eq 0 ] && [ $cluster_rc -eq 0 ]; then
    rm -rf "$work"  # ~45 MB of logs and data a run; kept when something failed
else
    echo ">> the sessions' temporary directories (Airflow, Spark and S3 logs) are kept in $work"
fi
echo ">> exit codes: ${TIMED[*]}: $timed_rc; ${CLUSTER[*]}: $cluster_rc; the others: $untimed_rc" \
     "(the whole suite, install included: $((SECONDS / 60)) min $((SECONDS % 60)) s)"
[ $timed_rc -eq 0 ] && [ $untimed_rc -eq 0 ] && [ $cluster_rc -eq 0 ]
