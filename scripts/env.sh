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
# Installed packages are compiled to bytecode: the suite starts hundreds of Python processes (Airflow
# components, task tries, dag.test runs), and without cached bytecode each compiles every module it
# imports from source (uv does not compile by default; measured: 11 of a dag.test run's 34 CPU-s).
INSTALL_FLAGS="--compile-bytecode"
want="$( (cat "$LOCK" "$ROOT/pyproject.toml"; echo "$INSTALL_FLAGS") | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    echo ">> installing locked dependencies (requirements/test.lock)"
    "$VENV/bin/uv" pip sync --quiet $INSTALL_FLAGS --python "$VENV/bin/python" "$LOCK"
    "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-deps -e "$ROOT"
    echo "$want" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
# The repository's own modules get cached bytecode too (__pycache__ is ignored by git), even where
# the machine's environment asks Python not to write it.
unset PYTHONDONTWRITEBYTECODE
export VIRTUAL_ENV="$VENV"
cd "$ROOT"
