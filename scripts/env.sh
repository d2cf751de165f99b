# Sourced by the set-up commands: creates .venv on first use and keeps it in step with the lock file.
# Needs only python3 (>= 3.10) on PATH; uv is installed into the venv itself.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FT_VENV:-$ROOT/.venv}"
LOCK="$ROOT/requirements/test.lock"
STAMP="$VENV/.ft-lock-stamp"

if [ ! -x "$VENV/bin/python" ]; then
    echo ">> creating virtual environment in $VENV"
    python3 -m venv "$VENV"
fi
if [ ! -x "$VENV/bin/uv" ]; then
    "$VENV/bin/python" -m pip install --quiet uv
fi
# Bytecode is compiled when a module is first imported and cached in __pycache__ for every later
# process (PYTHONDONTWRITEBYTECODE is unset below): the suite starts hundreds of Python processes, and
# without a cache each compiles every module it imports (measured: 11 of a dag.test run's 34 CPU-s).
# Not at install (uv's --compile-bytecode): that compiles all ~15,000 modules of the environment
# (64 CPU-s, ~32 s before the tests can start) where the suite imports ~3,000 of them (~10 CPU-s).
INSTALL_FLAGS=""
want="$( (cat "$LOCK" "$ROOT/pyproject.toml"; echo "$INSTALL_FLAGS") | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    echo ">> installing locked dependencies (requirements/test.lock)"
    "$VENV/bin/uv" pip sync --quiet $INSTALL_FLAGS --python "$VENV/bin/python" "$LOCK"
    "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-deps -e "$ROOT"
    echo "$want" > "$STAMP"
fi
# The editable install's build leaves airflow_ft_provider.egg-info in the repository: with the repository
# on PYTHONPATH (the live Airflow's components, dev.env) the distribution is then found twice, and every
# airflow command prints "Plugin 'ft_failover' already registered" on stdout. Its dist-info is in .venv.
rm -rf "$ROOT"/*.egg-info
export PATH="$VENV/bin:$PATH"
# Cached bytecode (see INSTALL_FLAGS), also for the repository's own modules (__pycache__ is ignored
# by git), even where the machine's environment asks Python not to write it.
unset PYTHONDONTWRITEBYTECODE
export VIRTUAL_ENV="$VENV"
cd "$ROOT"
