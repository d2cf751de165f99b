#!/usr/bin/env bash
# Re-resolve requirements/test.lock after changing dependencies in pyproject.toml.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
uv="${UV:-$(command -v uv || echo "$ROOT/.venv/bin/uv")}"
"$uv" pip compile pyproject.toml --extra test --python-version 3.11 --quiet -o requirements/test.lock
