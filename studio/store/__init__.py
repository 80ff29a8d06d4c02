"""Storage: the durable journal, the DuckDB tables materialised from it, the call log, the analyst views."""

from .interface import StoreInterface
from .journal import JournalError
from .rows import Batch, BlobRow, CallRow, EventRow, ProcessRow, RefusalRow, RequestRow
from .store import Store

__all__ = ["Batch", "BlobRow", "CallRow", "EventRow", "JournalError", "ProcessRow", "RefusalRow",
           "RequestRow", "Store", "StoreInterface"]
