#!/usr/bin/env bash
# Sets everything up and opens the studio: JupyterLab on notebooks/00-tour.ipynb (prints the URL without a browser).
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$ROOT"
studio validate processes/
exec studio tour "$@"
