# Sourced by the scripts that need Debian packages. Each package is named with a probe that finds it
# once installed: PKG=PROBE, the probe a path glob or a command name.

missing_debs() {  # missing_debs PKG=PROBE ...: sets MISSING_DEBS to the packages whose probe finds nothing
    MISSING_DEBS=()
    local entry pkg probe
    for entry in "$@"; do
        pkg="${entry%%=*}" probe="${entry#*=}"
        if [[ "$probe" == /* ]]; then compgen -G "$probe" >/dev/null && continue
        else command -v "$probe" >/dev/null && continue; fi
        MISSING_DEBS+=("$pkg")
    done
}

DEBS_PID=""
start_debs_install() {  # start_debs_install PKG ...: apt-get install (as root) in the background
    [ $# -gt 0 ] || return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo ">> missing Debian packages: $* (install them as root: apt-get install $*)" >&2
        return 1
    fi
    DEBS=("$@")
    DEBS_LOG="$(mktemp "${TMPDIR:-/tmp}/ft-apt.XXXXXX")"
    echo ">> installing $* (Debian packages)"
    ( export DEBIAN_FRONTEND=noninteractive
      apt-get install -y -q "$@" || { apt-get update -q && apt-get install -y -q "$@"; }
    ) >"$DEBS_LOG" 2>&1 &
    DEBS_PID=$!
}

wait_for_debs() {  # the install started above, if any: its log is deleted once it succeeded, shown if not
    [ -n "$DEBS_PID" ] || return 0
    local rc=0
    wait "$DEBS_PID" || rc=$?
    DEBS_PID=""
    if [ $rc -eq 0 ]; then
        echo ">> Debian packages ready after ${SECONDS} s"
        rm -f "$DEBS_LOG"
        return 0
    fi
    echo ">> apt-get install ${DEBS[*]} failed (log: $DEBS_LOG):" >&2
    tail -20 "$DEBS_LOG" >&2
    return 1
}

need_debs() {  # need_debs PKG=PROBE ...: installs (as root) what is missing and waits, or says how
    missing_debs "$@"
    start_debs_install "${MISSING_DEBS[@]}" && wait_for_debs
}
