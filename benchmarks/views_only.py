"""The loop's views alone, for counting their instructions: one supplier-onboarding run's committed versions
(start, claim, submit, decide) captured from the loop, their seven view builds repeated K times.

Instructions per run's views: the count of K=2000 minus that of K=0, divided by 2,000 (docs/performance.md,
"Eleventh pass"):

    OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0 PYTHONMALLOC=malloc valgrind --tool=cachegrind --cache-sim=no \\
        python benchmarks/views_only.py 2000        # and 0
"""

from __future__ import annotations

import itertools
import os
import random
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_loop  # noqa: E402  (this directory: the loop's process files and calls)

from studio import Engine, VirtualClock  # noqa: E402
from studio.engine import views  # noqa: E402
from studio.engine.state import RunState  # noqa: E402
from studio.engine.tools import reads  # noqa: E402


def main() -> None:
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    counter = itertools.count()
    generator = random.Random(7)
    engine = Engine.open(processes=[engine_loop.PROCESS, engine_loop.OPEN_PROCESS], directory=engine_loop.DIRECTORY,
                         db=":memory:", clock=VirtualClock("2026-10-06T09:00:00Z"),
                         ids=lambda prefix: f"{prefix}_{next(counter):016x}")
    engine_loop.one_run(lambda caller, tool, args: engine.call(caller, tool, args)["data"],
                        lambda: str(uuid.UUID(int=generator.getrandbits(128), version=4)), 0)
    # every document the run's writes committed, from the store's public table (docs/data-model.md)
    versions = [RunState.model_validate_json(doc) for (doc,) in engine.store.fetchall(
        "SELECT doc FROM run_revisions ORDER BY revision")]
    start, claimed, submitted, decided = versions[:4]
    now = engine.now()
    process = engine.process_of(start)
    for _ in range(repeat):
        engine.view(start)  # start_run's answer
        views.run_data(claimed, engine.file_url)  # claim's
        engine.view(submitted)  # submit's
        reads._inbox_entry(engine, submitted, 0, now)  # get_work's item
        engine.view(decided)  # decide's
        views.agent_work(start, "check_vendor", now)  # get_work's offer to the agent
        views.claim_step(process.step("check_vendor"))  # claim's step
    os._exit(0)  # no close: the count is of the views


if __name__ == "__main__":
    main()
