"""The notebook side of the engine: `studio.sql` on the engine opened last, and, in a Jupyter kernel, pending
writes materialised before every cell so `%sql` (jupysql on the engine's own DuckDB connection) sees every
write made before the cell, as `engine.sql` does. The engine knows nothing of this; `install` hooks it in."""

from __future__ import annotations

import logging
import sys
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from studio.engine import Engine

log = logging.getLogger("studio.notebook")

_latest: Callable[[], Engine | None] = lambda: None  # noqa: E731 - a weak reference, or nothing yet


def latest() -> Engine | None:
    """The engine opened last in this process (still alive), if any."""
    return _latest()


def sql(query: str, params: list[Any] | None = None) -> Any:
    """A DataFrame of `query` on the engine opened last in this kernel: `studio.sql("SELECT …")`."""
    engine = latest()
    if engine is None:
        raise RuntimeError("no engine is open: Engine.open(...) first, or use engine.sql(...)")
    return engine.sql(query, params)


def engine_opened(engine: Engine) -> None:
    """Remember the engine for `studio.sql`; in a kernel, sync it before each cell."""
    global _latest
    _latest = weakref.ref(engine)
    ipython = sys.modules.get("IPython")  # not imported: not in a kernel (CLI, server), nothing to do
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return
    ref = weakref.ref(engine)

    def sync(*_args: object) -> None:
        current = ref()
        if current is None or current.closed:
            return
        try:
            current.store.sync()
        except Exception:  # a failed sync must never break the user's cell; the next read retries
            log.exception("sync before cell failed")

    shell.events.register("pre_run_cell", sync)


def install(engine_class: type[Engine]) -> None:
    if engine_opened not in engine_class.opened_hooks:
        engine_class.opened_hooks.append(engine_opened)
