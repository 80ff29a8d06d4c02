#!/usr/bin/env bash
# The lowest-versions job: installs the studio with the lowest version every direct dependency allows
# (`uv pip install --resolution lowest-direct`; uv itself comes from PyPI) into a fresh virtual environment
# outside the checkout, and runs the engine tests there. A floor in pyproject.toml that is too low fails here.
# Usage: bash scripts/check-lowest.sh [pytest args]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/studio-lowest.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

"$PY" -m venv "$TMP/uv"
"$TMP/uv/bin/python" -m pip install --quiet "uv==0.9.8"
UV="$TMP/uv/bin/uv"
"$UV" venv --quiet --python "$PY" "$TMP/venv"
export VIRTUAL_ENV="$TMP/venv"
# The studio (not editable: a copy of the package) and its PostgreSQL extra (the engine tests run on both
# stores), every direct dependency at its floor ...
"$UV" pip install --quiet --resolution lowest-direct "$ROOT[postgres]"
# ... then the test tools, newest, without moving anything already installed.
"$UV" pip install --quiet "pytest>=8,<10" "pytest-timeout>=2.3,<3" "hypothesis>=6.100,<7"
"$UV" pip freeze | grep -iE '^(pydantic|duckdb|pandas|numpy|jsonschema|jsonschema-rs|orjson|referencing|pyyaml|google-re2|common-expression-language|mcp|mcp-types|httpx2|httpx|anyio|uvicorn|starlette|h11|tqdm|psycopg|psycopg-binary|psycopg-pool)==' \
  | tr '\n' ' ' | sed 's/^/check-lowest: /'; echo
# The engine tests, from the checkout's tests/ but importing the installed package.
# test_engine_notebook_sync.py needs IPython (the notebook extra), so it is not among them.
TESTS=()
for t in "$ROOT"/tests/test_engine_*.py "$ROOT"/tests/test_core2_schemas.py "$ROOT"/tests/test_definition_*.py; do
  [ "$(basename "$t")" = test_engine_notebook_sync.py ] || TESTS+=("$t")
done
cd "$ROOT"  # some tests open processes/ by a relative path; -P keeps the checkout off sys.path
# Left out: the check that the checkout's process files point at the checkout's own package schema.
"$TMP/venv/bin/python" -P -m pytest -q -p no:cacheprovider --rootdir "$ROOT/tests" -c /dev/null "${TESTS[@]}" \
  -k "not test_bundled_processes_name_the_schema_and_satisfy_it" "$@"
