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
want="$(cat "$LOCK" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    echo ">> installing locked dependencies (requirements/test.lock)"
    "$VENV/bin/uv" pip sync --quiet --python "$VENV/bin/python" "$LOCK"
    "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-deps -e "$ROOT"
    echo "$want" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export VIRTUAL_ENV="$VENV"
cd "$ROOT"
