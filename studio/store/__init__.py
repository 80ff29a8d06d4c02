"""Storage: DuckDB tables, the events log, the call log and the analyst views."""

from .store import Batch, Store

__all__ = ["Batch", "Store"]
