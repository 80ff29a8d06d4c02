#!/usr/bin/env bash
# Sets everything up and runs every test: unit, integration, MCP server, notebooks (nbval) and the browser test.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$ROOT"
bash .ci/install-browser.sh
bash scripts/postgres.sh install  # PostgreSQL 15 binaries for the team-server tests (they start their own cluster)
ruff check studio tests benchmarks examples
mypy  # the package's types ([tool.mypy] in pyproject.toml): both stores against studio/store/interface.py
studio validate processes/
# pytest exits 5 when it collects nothing: with `set -e` that fails the run, as it should.
python -m pytest tests notebooks --nbval-lax -p no:cacheprovider "$@"
# The package outside this checkout: the wheel in a fresh environment, then the lowest allowed versions.
bash scripts/check-wheel.sh
bash scripts/check-lowest.sh
