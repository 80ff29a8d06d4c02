"""How a transaction's statements travel: several in one message, answered in one round trip.

psycopg's pipeline mode sends (and the server wakes up for) each statement on its own, and costs ~40 µs of
Python per statement; a tool call makes six to eight. Here the statements of a transaction are queued as
text with their values written in as SQL literals, and sent together as one simple-protocol message
(`BEGIN; SELECT …; SELECT …`) when a row is first needed; the writes go with `COMMIT` in the last one.

The literals are written for the few Python types the store sends (`literal`); anything else is refused,
never guessed at. Text is quoted as PostgreSQL reads it with `standard_conforming_strings` on (set by the
store on every connection): only `'` needs doubling. A NUL character cannot be in PostgreSQL text and is
refused here, before anything is sent (the contract's checks refuse it in a call's arguments first).

The statements a call makes every time are prepared once per connection (SQL `PREPARE`, sent in front of
their first use, the parameter types taken from where each is used) and sent as `EXECUTE name(literals)`:
PostgreSQL then plans them once, not on every call.
"""

from __future__ import annotations

import hashlib
import math
import re
import weakref
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

# At most this many statements prepared per connection (the engine's own come to a few dozen).
MAX_PREPARED = 256


class Dropped(RuntimeError):
    """A statement of a block that failed before it was sent: it never ran, so it has no rows."""


def literal(value: Any) -> str:
    """`value` as a SQL literal (typed by its context, as an untyped parameter is)."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("PostgreSQL text cannot contain the NUL character (0x00)")
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"({value})"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"'{value}'::float8"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "'\\x" + bytes(value).hex() + "'::bytea"
    if isinstance(value, (datetime, date)):
        return "'" + value.isoformat() + "'"
    if isinstance(value, (list, tuple)):
        return "ARRAY[" + ", ".join(map(literal, value)) + "]" if value else "'{}'"
    raise TypeError(f"no SQL literal for a {type(value).__name__}")


def _split(query: str, params: Sequence[Any]) -> list[str]:
    """The statement's text around its `%s` placeholders (`%%` is a `%`, as psycopg reads a statement
    with parameters)."""
    parts = query.split("%s")
    if len(parts) != len(params) + 1:
        raise TypeError(f"the statement has {len(parts) - 1} placeholders, {len(params)} parameters were given")
    return [part.replace("%%", "%") for part in parts] if "%%" in query else parts


def bind(query: str, params: Sequence[Any]) -> str:
    """The statement with each `%s` replaced by the literal of its parameter."""
    if not params:
        return query
    parts = _split(query, params)
    out = [parts[0]]
    for value, part in zip(params, parts[1:], strict=True):
        out.append(literal(value))
        out.append(part)
    return "".join(out)


def _numbered(query: str, params: Sequence[Any]) -> str:
    """The statement with `$1`, `$2`, … for its placeholders (the text `PREPARE` takes)."""
    parts = _split(query, params)
    return parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))


# A statement that only reads: it may go before the transaction's BEGIN (a lazy transaction, below).
_READ = re.compile(r"^\s*SELECT\b", re.IGNORECASE)
_NOT_READ = re.compile(r"\bFOR\s+(UPDATE|NO\s+KEY|SHARE|KEY)\b|nextval|setval|pg_advisory|set_config", re.IGNORECASE)


def only_reads(query: str) -> bool:
    return bool(_READ.match(query)) and not _NOT_READ.search(query)


# The names each connection has prepared (a connection the pool replaces is forgotten with it).
_PREPARED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


class Pending:
    """A queued statement's rows, there once the message it went in is answered (`fetchall`)."""

    __slots__ = ("_batch", "_rows", "_error")

    def __init__(self, batch: Outbox):
        self._batch = batch
        self._rows: list[tuple] | None = None
        self._error: BaseException | None = None

    def fetchall(self) -> list[tuple]:
        if self._rows is None and self._error is None:
            self._batch.flush()
        if self._error is not None:
            raise self._error
        return self._rows or []

    def fetchone(self) -> tuple | None:
        rows = self.fetchall()
        return rows[0] if rows else None


class Outbox:
    """The statements of one transaction on one connection, queued until a row is needed.

    A lazy one (`lazy=True`: a call that reads) sends no BEGIN while it only reads: its reads run on
    their own, as they would in the transaction (each statement sees what is committed when it starts),
    and if nothing else comes there is nothing to commit and no second round trip. The first statement
    that is not a plain read (a lock, a write) gets BEGIN in front of it, and COMMIT at the end."""

    def __init__(self, conn: Any, *, lazy: bool = False):
        self.conn = conn
        self.begun = False
        self.queued: list[tuple[str, Pending | None]] = []
        self.sent = 0  # statements sent so far (a savepoint knows whether it was)
        self.prepared = _PREPARED.setdefault(conn, set())
        self.preparing: set[str] = set()  # PREPAREs queued, not yet answered
        self.uncertain = False  # a message with a PREPARE failed: which ran is asked (`resync`)
        if not lazy:
            self.begin()

    def begin(self) -> None:
        """BEGIN, unless it was queued already."""
        if not self.begun:
            self.queued.append(("BEGIN", None))
            self.begun = True

    def finish(self) -> None:
        """COMMIT and send what is queued; a lazy transaction that only read drops its unread reads."""
        if self.begun:
            self.queued.append(("COMMIT", None))
            self.flush()
        else:
            self.drop_from(self.sent)

    def add(self, query: str, params: Sequence[Any] = (), *, rows: bool = False, prepare: bool = False) -> Pending | None:
        """Queue a statement (`%s` placeholders); its `Pending` rows when `rows`. `prepare`: a statement the
        engine makes over and over (never a utility statement: PREPARE takes only SELECT, INSERT, …)."""
        if not self.begun and not only_reads(query):
            self.begin()
        if prepare:
            name = "studio_" + hashlib.blake2b(query.encode(), digest_size=8).hexdigest()
            known = name in self.prepared or name in self.preparing
            if not known and len(self.prepared) + len(self.preparing) < MAX_PREPARED:
                self.queued.append((f"PREPARE {name} AS {_numbered(query, params)}", None))
                self.preparing.add(name)
                known = True
            if known:
                statement = f"EXECUTE {name}({', '.join(map(literal, params))})" if params else f"EXECUTE {name}"
            else:
                statement = bind(query, params)
        else:
            statement = bind(query, params)
        pending = Pending(self) if rows else None
        self.queued.append((statement, pending))
        return pending

    @property
    def position(self) -> int:
        """The number the next statement queued will have."""
        return self.sent + len(self.queued)

    def drop_from(self, position: int) -> None:
        """Forget the unsent statements from `position` on (their block failed before they were sent)."""
        keep = max(0, position - self.sent)
        for statement, pending in self.queued[keep:]:
            if pending is not None:
                pending._error = Dropped("the statement's block failed before it was sent")
            if statement.startswith("PREPARE "):
                self.preparing.discard(statement.split(" ", 2)[1])
        del self.queued[keep:]

    def flush(self) -> None:
        """Send everything queued as one message; each statement's rows go to its `Pending`."""
        queued, self.queued = self.queued, []
        if not queued:
            return
        self.sent += len(queued)
        cur = self.conn.cursor()
        try:
            cur.execute(";\n".join(statement for statement, _ in queued), prepare=False)
        except BaseException as exc:
            for _, pending in queued:
                if pending is not None:
                    pending._error = exc
            if self.preparing:
                self.uncertain, self.preparing = True, set()
            raise
        self.prepared |= self.preparing
        self.preparing = set()
        for i, (_, pending) in enumerate(queued):
            if i and not cur.nextset():
                raise RuntimeError("fewer results than statements")  # never: one result per statement
            if pending is not None:
                pending._rows = cur.fetchall() if cur.description is not None else []

    def resync(self) -> None:
        """After a failed message that held a PREPARE (and the rollback): ask which statements exist."""
        if self.uncertain:
            names = [n for (n,) in self.conn.execute("SELECT name FROM pg_prepared_statements").fetchall()]
            self.prepared.clear()
            self.prepared.update(n for n in names if n.startswith("studio_"))
            self.uncertain = False
