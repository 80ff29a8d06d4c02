"""Idempotency records in bounded memory: which `(caller, requestId)` pairs the store holds a replay for.

Every write asks "was this request made before?", and nearly always the answer is no. Asking DuckDB each
time would cost a query per write, and keeping every record in a dict costs memory that grows with
history. So the store keeps:

- the records not yet materialised (`pending`): whole, with their answer, as today;
- for the materialised ones, only a 64-bit digest of each key (the md5 of `caller \\x01 requestId`,
  computed by DuckDB's `md5_number_lower` when a record is materialised and stored with it, column
  `requests.key_digest`, and by Python at write time) and the second it was
  stored at: sorted numpy arrays read at open plus a dict of those added since. A digest that is absent
  means a new request, decided in memory; one that is present is confirmed by one query on
  `stored_at = that second` (the table is in time order, so DuckDB reads one row group; a 64-bit clash
  costs that query, never a wrong answer).

Records are kept for a window (`DEFAULT_REQUEST_RETENTION`, docs/limits.md): a replay within it is exact;
the store deletes older ones when the engine prunes (see `Engine.prune`), and never replays one past it.
Memory is 16 bytes per record in the window; open reads the window's digests, not history's.
"""

from __future__ import annotations

import functools
import hashlib
import struct
from datetime import datetime, timedelta

import numpy as np

from .rows import RequestRow

DEFAULT_REQUEST_RETENTION = timedelta(days=7)
MIN_REQUEST_RETENTION = timedelta(minutes=1)  # a window shorter than a client's retry loop is a bug
_MERGE_AT = 65_536  # digests added since open are merged into the sorted array past this many

# The same digest in SQL: the store writes it with each record (and migrate.py for older files).
KEY_DIGEST_SQL = "md5_number_lower(caller || chr(1) || request_id)"


try:  # CPython's own md5: for a key's few bytes ~2x cheaper than OpenSSL's (its context set up per digest)
    from _md5 import md5 as _md5
except ImportError:  # an interpreter built without it
    _md5 = functools.partial(hashlib.md5, usedforsecurity=False)
_LOW = struct.Struct("<Q")  # the md5's last 8 bytes as an unsigned little-endian integer


def key_digest(caller: str, request_id: str) -> int:
    """`KEY_DIGEST_SQL` in Python: DuckDB's md5_number_lower is the md5's last 8 bytes, little-endian (every
    write asks, `RequestIndex.stored_at`)."""
    return _LOW.unpack_from(_md5(f"{caller}\x01{request_id}".encode()).digest(), 8)[0]


def _second(at: str) -> int:
    """An ISO 8601 time as the epoch second the table's digests are read with."""
    return int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())


class RequestIndex:
    """The store's knowledge of which requests it holds: `pending` whole, the materialised ones as digests
    with the second each was stored at (so the one query a known digest costs reads one row group)."""

    def __init__(self) -> None:
        # Committed but not yet materialised, answered from memory: the `requests` row the write committed.
        self.pending: dict[tuple[str, str], RequestRow] = {}
        self._digests = np.empty(0, dtype=np.uint64)  # sorted
        self._stored = np.empty(0, dtype=np.int64)  # epoch seconds, in the digests' order
        # digest -> the seconds its records were stored at: a tuple of ints, which the collector stops tracking (a list
        # per record, kept for the window, was walked by every full collection: docs/performance.md, "Twelfth pass")
        self._recent: dict[int, tuple[int, ...]] = {}
        self.loaded = False

    def load(self, digests: np.ndarray, stored: np.ndarray, *, ordered: bool = False) -> None:
        """Replace what is known of the materialised records (at open, after a prune); `ordered` when the
        digests come sorted already (the store reads them so)."""
        digests = np.asarray(digests, dtype=np.uint64)
        stored = np.asarray(stored, dtype=np.int64)
        if not ordered:
            order = np.argsort(digests)
            digests, stored = digests[order], stored[order]
        self._digests, self._stored = digests, stored
        self._recent = {}
        self.loaded = True

    def add(self, caller: str, request_id: str, record: RequestRow) -> None:
        self.pending[(caller, request_id)] = record

    def materialised(self, keys: list[tuple[str, str]]) -> None:
        """These pending records are in the table now: keep their digests only."""
        for key in keys:
            record = self.pending.pop(key, None)
            if record is not None:
                digest = key_digest(*key)
                self._recent[digest] = (*self._recent.get(digest, ()), _second(record.stored_at))
        if len(self._recent) > _MERGE_AT:
            digests = [d for d, ats in self._recent.items() for _ in ats]
            stored = [at for ats in self._recent.values() for at in ats]
            self.load(np.concatenate([self._digests, np.array(digests, dtype=np.uint64)]),
                      np.concatenate([self._stored, np.array(stored, dtype=np.int64)]))

    def stored_at(self, caller: str, request_id: str) -> list[int]:
        """When records with this key's digest were stored (epoch seconds): none means the table surely
        has no record of this request; any other answer is confirmed by the table."""
        digest = key_digest(caller, request_id)
        found = list(self._recent.get(digest, ()))
        if not len(self._digests):  # nothing loaded at open: no numpy search (a few µs per write)
            return found
        target = np.uint64(digest)
        left = int(np.searchsorted(self._digests, target, side="left"))
        if left < len(self._digests) and self._digests[left] == target:
            right = int(np.searchsorted(self._digests, target, side="right"))
            found.extend(int(at) for at in self._stored[left:right])
        return found

    def forget_older(self, cutoff: str) -> None:
        """Forget the records stored before `cutoff` (the store deletes the table's): pending ones whole,
        digests by the second they were stored in (one stored in the cutoff's own second may stay: a digest
        with no record behind it costs a look-up, never a wrong answer)."""
        for key in [k for k, p in self.pending.items() if p.stored_at < cutoff]:
            del self.pending[key]
        second = _second(cutoff)
        keep = self._stored >= second
        if not keep.all():
            self._digests, self._stored = self._digests[keep], self._stored[keep]  # still in digest order
        for digest in list(self._recent):
            kept = tuple([at for at in self._recent[digest] if at >= second])
            if kept:
                self._recent[digest] = kept
            else:
                del self._recent[digest]

    def __len__(self) -> int:
        """How many records: exact once loaded (the store loads before it answers `request_count`)."""
        return len(self.pending) + len(self._digests) + sum(len(ats) for ats in self._recent.values())
