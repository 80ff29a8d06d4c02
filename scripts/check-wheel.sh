#!/usr/bin/env bash
# Builds the wheel, installs it without extras into a fresh virtual environment outside the checkout and
# checks there that it works from itself (tests/wheel/check_installed.py): studio init, one whole
# supplier-onboarding run through Engine.call, studio validate, studio serve + describe over HTTP.
# Also fails if the core install pulls in JupyterLab or the notebook widgets.
# Usage: bash scripts/check-wheel.sh   (PYTHON=python3.12 to build the venv with another interpreter)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/studio-wheel.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

"$PY" -m pip wheel --quiet --no-deps --wheel-dir "$TMP/dist" "$ROOT"
WHEEL="$(ls "$TMP"/dist/*.whl)"
echo "check-wheel: built $(basename "$WHEEL")"
"$PY" -m venv "$TMP/venv"
"$TMP/venv/bin/python" -m pip install --quiet --upgrade pip
"$TMP/venv/bin/python" -m pip install --quiet "$WHEEL"
for extra in jupyterlab ipywidgets anywidget jupysql altair matplotlib; do
  if "$TMP/venv/bin/python" -m pip show --quiet "$extra" >/dev/null 2>&1; then
    echo "check-wheel: the core install pulled in $extra (it belongs in the [notebook] extra)" >&2
    exit 1
  fi
done
mkdir "$TMP/work"
cp "$ROOT/tests/wheel/check_installed.py" "$TMP/check_installed.py"
# From a folder outside the checkout, with nothing of the checkout on sys.path.
(cd "$TMP/work" && env -u PYTHONPATH "$TMP/venv/bin/python" -P "$TMP/check_installed.py" "$TMP/work")
