"""The server process's garbage collector (docs/performance.md, "The garbage collector"): a process-wide
choice that `studio serve` makes once it is up, never the library (a notebook's process is its user's).

A full (generation 2) collection walks every tracked object in the process, and most of them are the
imported libraries' (~200,000 with the MCP SDK, DuckDB, pandas and pydantic loaded): measured at ~100 ms
each, paid by whichever tool call happens to trigger it. Frozen after start-up, those objects are left out
of every later collection; only what the engine builds while serving is still collected. A larger
generation-0 threshold lets a call's short-lived containers die before the first collection sees them,
so fewer of them are promoted to the older generations (whose collections cost the most).
"""

from __future__ import annotations

import gc

THRESHOLD = (5000, 20, 10)  # generation 0 allocations, then collections of 0 per 1 and of 1 per 2


def settle_heap() -> None:
    """Collect once, freeze what is left (start-up's objects) and raise the young generation's threshold."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLD)
