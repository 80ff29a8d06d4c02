"""How fast `studio validate` answers, on a real process file and on hostile ones (an alias bomb, nesting
100,000 deep, a 5 MB file): in process (the loader and lint) and as a command (Python start-up included).

tests/test_cli.py checks what each answer says and bounds each only against a hang; the speed is here.

    python benchmarks/validate.py            # 5 rounds each (about half a minute)
    python benchmarks/validate.py --quick    # 1 round each
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from studio.cli import main as studio_main

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the hostile files the CLI tests use
from test_cli import BAD_FILES, TAIL  # noqa: E402

FILES: dict[str, bytes] = {
    "supplier-onboarding": (ROOT / "processes" / "supplier-onboarding.yaml").read_bytes(),
    "alias bomb (10^9 values)": BAD_FILES["alias-bomb"][0],
    "nesting 100,000 deep": BAD_FILES["deep-nesting"][0],
    "5 MB file": ("name: big\nbody: |\n" + ("  " + "x" * 97 + "\n") * 53_000 + TAIL).encode(),
}


def _in_process(path: Path) -> float:
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        studio_main(["validate", str(path)])
    return time.perf_counter() - started


def _command(path: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "studio.cli", "validate", str(path)], capture_output=True, check=False,
                   timeout=600)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds per file (the median is printed)")
    parser.add_argument("--quick", action="store_true", help="one round per file")
    args = parser.parse_args()
    rounds = 1 if args.quick else max(1, args.rounds)
    print(f"{'file':<28} {'in process (ms)':>16} {'command (ms)':>14}   median of {rounds}")
    with tempfile.TemporaryDirectory() as folder:
        warm = Path(folder) / "warm.yaml"
        warm.write_bytes(FILES["supplier-onboarding"])
        _in_process(warm)  # the first call imports the loader, lint and checks: not what is measured
        for name, content in FILES.items():
            path = Path(folder) / "p.yaml"
            path.write_bytes(content)
            inside = statistics.median(_in_process(path) for _ in range(rounds))
            command = statistics.median(_command(path) for _ in range(rounds))
            print(f"{name:<28} {inside * 1000:>16.0f} {command * 1000:>14.0f}")


if __name__ == "__main__":
    main()
