#!/usr/bin/env bash
# EXPERIMENT, not part of the package: builds a scratch copy of this tree's `studio` with nine of the engine's hot
# modules compiled by mypyc, to measure what compiling would give (docs/performance.md, "Compiled modules (mypyc):
# measured, not adopted"). Nothing here changes the package, its build or CI.
#
#   bash benchmarks/mypyc_experiment.sh [OUT]     # OUT defaults to /tmp/studio_mypyc; needs gcc and Python headers
#
# Then, from this tree, with the project's own virtualenv (the compiled modules need nothing at run time):
#   PYTHONPATH=OUT python benchmarks/engine_only.py --runs 302        # under cachegrind as docs/performance.md says
#   PYTHONPATH=OUT python benchmarks/engine_loop.py --runs 1000 --db :memory:
#   cd OUT && python -m pytest tests/test_engine_hot_path.py …        # the tests against the compiled tree
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-/tmp/studio_mypyc}"
venv="${MYPYC_VENV:-/tmp/mypyc_venv}"
python="${PYTHON:-python3.11}"
if [ ! -x "$venv/bin/python" ]; then  # a separate venv: mypy and the runtime deps, the project's venv untouched
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q mypy==2.4.1 setuptools "$here"  # the package itself only for its dependencies
  "$venv/bin/pip" uninstall -q -y agentprocess-studio
fi
rm -rf "$out" && mkdir -p "$out"
# The tree measured in docs/performance.md (dc40f56): the edits below are for its text, and later passes
# changed some of it (machine.Tx is a slotted class since the tenth pass). MYPYC_REV=HEAD tries the current one.
git -C "$here" archive "${MYPYC_REV:-dc40f56}" | tar -x -C "$out"
cd "$out"
# The two edits mypyc needs in these modules (see the section named above for why).
"$venv/bin/python" - <<'PY'
import pathlib


def sub(path: str, old: str, new: str) -> None:
    p = pathlib.Path(path)
    text = p.read_text()
    assert old in text, (path, old)
    p.write_text(text.replace(old, new, 1))


sub("studio/contract/bounds.py", '_Path = tuple["_Path", str | int] | None',
    "_Path = tuple[Any, str | int] | None  # mypyc recurses without end on a recursive alias in a signature")
sub("studio/contract/bounds.py", '_SURROGATE = re.compile("[\\ud800-\\udfff]")',
    '_SURROGATE = re.compile("[" + chr(0xD800) + "-" + chr(0xDFFF) + "]")  # mypyc: no surrogates in literals')
sub("studio/engine/machine.py", "    _at: tuple[datetime, str] | None = field(default=None, init=False, repr=False)",
    "    _at: tuple[datetime, str] | None = None  # mypyc: a native dataclass never sets an init=False default")
sub("studio/engine/machine.py", 'end_run(tx, "done", step.outcome_name, None)',
    'end_run(tx, "done", step.outcome_name, None)  # type: ignore[union-attr]')
PY
cat > setup_mypyc.py <<'PY'
from mypyc.build import mypycify
from setuptools import setup

HOT = """studio/engine/values.py studio/engine/requests.py studio/engine/leases.py studio/engine/tokens.py
studio/contract/bounds.py studio/limits.py studio/jsonutil.py studio/engine/views.py studio/engine/machine.py"""
setup(name="studio-mypyc-experiment", packages=[],
      ext_modules=mypycify(["--ignore-missing-imports", "--follow-imports=silent", *HOT.split()], opt_level="3"))
PY
"$venv/bin/python" setup_mypyc.py build_ext --inplace
find studio -name '*.so' | sort
