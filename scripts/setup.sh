#!/usr/bin/env bash
# Sourced by studio.sh and test.sh: a virtual environment in .venv with the studio and its dev tools.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "Process Studio needs Python 3.11 or newer (found: $("$PY" --version 2>&1))." >&2
  exit 1
fi
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  "$PY" -m venv "$ROOT/.venv"
fi
VENV="$ROOT/.venv"
# Re-install only when the dependency list changed since the last install.
STAMP="$VENV/.studio-installed"
WANT="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e "$ROOT[dev]"
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export PLOOMBER_STATS_ENABLED=false  # jupysql: no telemetry (and no network)
