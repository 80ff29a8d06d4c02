"""The store interface: what the engine asks of a store, whichever database holds it.

Two classes implement it: `studio.store.Store` (a durable journal, the DuckDB tables materialised from it) and
`studio.store.postgres.PostgresStore` (one PostgreSQL database shared by several server processes). The engine
and its tools are typed against this protocol, so a type checker (`mypy studio`, run by the test command)
checks both classes against it; what only one store does (DuckDB's `run_doc`, PostgreSQL's `queue`) is read
through that class, by the code written for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .rows import Batch, CallRow


class StoreInterface(Protocol):
    path: str
    durable: bool

    @property
    def broken(self) -> bool:
        """A durable write failed: what is in memory may be ahead of the disk (`reset` goes back)."""
        ...

    @property
    def last_seq(self) -> int:
        """The last write queued: an answer computed now may depend on every write up to it."""
        ...

    # -- writes -------------------------------------------------------------------------------------------
    def commit(self, batch: Batch) -> int:
        """Queue one write's records; its sequence number, for `wait`."""
        ...

    def wait(self, seq: int) -> None:
        """Return once write `seq` and every write before it are durable."""
        ...

    def write(self, batch: Batch) -> None:
        """Commit and wait: writes outside a tool call (publish, the lease sweep, pauses)."""
        ...

    def reset(self) -> None:
        """After a failed write: back to exactly what is durable."""
        ...

    def log_call(self, row: CallRow) -> None:
        """The call-log line of a call that wrote nothing (buffered)."""
        ...

    # -- replays ------------------------------------------------------------------------------------------
    def request(self, caller: str, request_id: str, since: str | None = None) -> tuple[str, str, str] | None:
        """A stored request's (tool, digest, answer), if it was stored at or after `since`."""
        ...

    @property
    def request_count(self) -> int:
        """How many replay records are kept."""
        ...

    def prune_requests(self, before: str) -> None:
        """Forget the replay records stored before `before`: none is replayed after this returns, and the
        store deletes them (at once, or in the background before its next read: `Store.prune_requests`)."""
        ...

    # -- meta (the signing key) -----------------------------------------------------------------------------
    def meta(self, key: str) -> str | None: ...

    def delete_meta(self, key: str) -> None: ...

    # -- reads of the tables --------------------------------------------------------------------------------
    def maybe_sync(self) -> None:
        """Materialise what is due (a store may have nothing to do)."""
        ...

    def sync(self) -> None:
        """Every acknowledged write in the tables: before a read of them."""
        ...

    def pending_docs(self) -> list[str]:
        """The run documents written but not yet in the tables."""
        ...

    def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[tuple]: ...

    def fetch_materialised(self, query: str, params: Sequence[Any] = ()) -> list[tuple]: ...

    def sql(self, query: str, params: Sequence[Any] | None = None) -> Any:
        """A query of the analyst views, as a DataFrame."""
        ...

    def cursor(self) -> AbstractContextManager[Any]:
        """A connection to the tables, every acknowledged write in them."""
        ...

    def close(self) -> None: ...
