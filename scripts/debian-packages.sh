# Sourced by the scripts that need Debian packages: need_debs PKG=PROBE ... installs (as root) each
# package whose probe (a path glob or a command name) finds nothing, or says how and fails.
need_debs() {
    local missing=() entry pkg probe
    for entry in "$@"; do
        pkg="${entry%%=*}" probe="${entry#*=}"
        if [[ "$probe" == /* ]]; then compgen -G "$probe" >/dev/null && continue
        else command -v "$probe" >/dev/null && continue; fi
        missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo ">> missing Debian packages: ${missing[*]} (install them as root: apt-get install ${missing[*]})" >&2
        return 1
    fi
    echo ">> installing ${missing[*]} (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
}
