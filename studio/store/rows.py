"""Typed rows: one `NamedTuple` per stored table, its fields in the table's column order.

The column list of each table is `Row._fields`, defined here once (tests compare it with schema.sql), and a
row is a plain tuple on the hot path, so building one costs what a tuple costs. `Batch` is everything one
accepted write changes; `Record` is a batch as the journal keeps it (numbered, its documents as JSON text).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import orjson

from studio.jsonutil import sorted_dumpb, stdlib_dumps


class RunRow(NamedTuple):
    id: str
    process: str
    version: int
    mode: str
    state: str
    outcome: str | None
    started_by: str
    started_at: str
    updated_at: str
    ended_at: str | None
    ended_by: str | None
    ended_note: str | None
    inputs: str  # JSON
    revision: int
    doc: str  # the whole run document, JSON


class StepRow(NamedTuple):
    run_id: str
    step_id: str
    kind: str
    position: int
    state: str | None
    ready_since: str | None
    due: str | None
    attempt: int
    claimed_by: str | None
    lease_expires_at: str | None
    updated_at: str


class EventRow(NamedTuple):
    seq: int  # 0 as a write emits it, until the store numbers it at commit
    occurred_at: str
    run_id: str | None
    step_id: str | None
    type: str
    actor: str | None
    payload: str  # JSON


class RequestRow(NamedTuple):
    """The replay record of a write by `requestId`: the same request gets the same answer."""

    caller: str
    request_id: str
    tool: str
    args_sha256: str
    result: str  # the envelope, JSON
    stored_at: str


class CallRow(NamedTuple):
    seq: int  # 0 until the store numbers it
    called_at: str
    tool: str
    caller: str
    ok: bool
    code: str | None
    issues: str | None  # JSON
    latency_ms: float
    request_id: str | None
    run_id: str | None
    step_id: str | None
    attempt: int | None
    decision: str | None
    replay: bool


class ProcessRow(NamedTuple):
    name: str
    version: int
    sha256: str
    source: str
    definition: str  # JSON
    description: str | None
    file: str | None
    published_at: str


class BlobRow(NamedTuple):
    id: str
    content: bytes


class RefusalRow(NamedTuple):
    """The issues of the last not-accepted submit of one lease attempt (one row per attempt: a later
    refusal of the same attempt replaces it)."""

    run_id: str
    step_id: str
    attempt: int
    issues: str  # JSON list
    refused_at: str


class RevisionRow(NamedTuple):
    """A run document as one write committed it, with the first and last seq of the events that write
    recorded for the run: the run as it was after any of its events, which a fork starts from."""

    run_id: str
    revision: int
    first_seq: int | None
    last_seq: int | None
    doc: str  # JSON


# A column of `runs` and `steps` after the row types' own: the journal seq through which the materialisation
# that wrote the row ran (Store._delete_replaced finds a run's steps rows by it; schema version 4).
MATERIALISED_SEQ = "materialised_seq"

TIME_COLUMNS = frozenset({"started_at", "updated_at", "ended_at", "ready_since", "due", "lease_expires_at",
                          "occurred_at", "stored_at", "called_at", "published_at"})

# Each table and the row type of its columns (a test compares them with schema.sql).
TABLE_ROWS: dict[str, type[tuple]] = {
    "runs": RunRow, "steps": StepRow, "events": EventRow, "requests": RequestRow, "tool_calls": CallRow,
    "processes": ProcessRow, "file_blobs": BlobRow, "submit_refusals": RefusalRow, "run_revisions": RevisionRow,
}


class RunDocument(Protocol):
    """What the store needs of a run document (the engine's `RunState`): its id, revision and JSON."""

    id: str
    revision: int

    def model_dump_json(self) -> str: ...


@dataclass(init=False)
class Batch:
    """Everything one accepted write changes; durable together or not at all."""

    runs: list[RunDocument] = field(default_factory=list)  # the last document per id wins
    events: list[EventRow] = field(default_factory=list)  # seq 0: numbered at commit
    processes: list[ProcessRow] = field(default_factory=list)
    blobs: list[BlobRow] = field(default_factory=list)
    refusals: list[RefusalRow] = field(default_factory=list)
    request: RequestRow | None = None
    call: CallRow | None = None  # the call-log row of the call that made this write: as durable as the write

    def __init__(self, runs: list[RunDocument] | None = None, events: list[EventRow] | None = None,
                 processes: list[ProcessRow] | None = None, blobs: list[BlobRow] | None = None,
                 refusals: list[RefusalRow] | None = None, request: RequestRow | None = None,
                 call: CallRow | None = None) -> None:
        """The fields above, with list literals where the dataclass's `__init__` calls five default factories
        (one or two batches a write: ~0.3 µs less each; tests/test_engine_machine_models.py compares them)."""
        self.runs = [] if runs is None else runs
        self.events = [] if events is None else events
        self.processes = [] if processes is None else processes
        self.blobs = [] if blobs is None else blobs
        self.refusals = [] if refusals is None else refusals
        self.request = request
        self.call = call

    def event(self, at: str, run_id: str | None, step_id: str | None, type_: str, actor: str | None,
              payload: dict[str, Any] | None = None) -> None:
        # Keys sorted, compact (orjson): the views read payloads with DuckDB's JSON functions, whose answers
        # do not depend on the spacing.
        # Built by the tuple constructor (`new_row`, below): a NamedTuple's `__new__` is a frame, ~2 events a write.
        # orjson called here, not through `sorted_dumpb`'s frame: a payload is the engine's own plain values; what
        # orjson refuses (a model, an integer past 64 bits, a lone surrogate in a caller's inputs) goes to it.
        try:
            text = orjson.dumps(payload or {}, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:
            text = sorted_dumpb(payload or {}).decode()
        self.events.append(new_row(EventRow, (0, at, run_id, step_id, type_, actor, text)))

    @property
    def empty(self) -> bool:
        return not (self.runs or self.events or self.processes or self.blobs or self.refusals or self.request
                    or self.call)


@dataclass
class Record:
    """One journal entry: a numbered batch, with each run document as JSON text (the last per run id).

    `Store.commit` gives the sequences other than `events` as tuples (the empty ones the one empty tuple): a record
    waits for materialisation for up to `SYNC_EVERY` calls, long enough for the garbage collector to move what it
    holds to its oldest generation, and a tuple of text is one the collector stops tracking, where a list is walked
    by every later full collection (docs/performance.md, "Twelfth pass: what the engine leaves to the collector")."""

    seq: int
    docs: Sequence[str]
    events: list[EventRow]
    processes: Sequence[ProcessRow] = field(default_factory=list)
    blobs: Sequence[BlobRow] = field(default_factory=list)
    refusals: Sequence[RefusalRow] = field(default_factory=list)
    request: RequestRow | None = None
    call: CallRow | None = None
    # (run id, revision) of each of `docs`, in order, known without parsing them (None: read from the texts)
    heads: Sequence[tuple[str, int]] | None = None

    def doc_heads(self) -> Sequence[tuple[str, int]]:
        if self.heads is None:
            self.heads = [(doc["id"], doc.get("revision", 0)) for doc in map(json.loads, self.docs)]
        return self.heads


# A row built by the tuple constructor itself: a NamedTuple's own `__new__` is a Python function, a frame per row
# (materialisation builds thousands of rows per batch). The fields are given whole, in order, as its `__new__` would take them.
new_row = tuple.__new__


def _has_float(value: Any) -> bool:
    """Whether a parsed JSON value holds a float anywhere."""
    kind = type(value)
    if kind is float:
        return True
    if kind is dict:
        return any(map(_has_float, value.values()))
    if kind is list:
        return any(map(_has_float, value))
    return False


def _kept_float(value: Any) -> bool:
    """`_has_float`, an integer (most kept numbers) known without a call."""
    return type(value) is not int and _has_float(value)


def read_doc(text: str) -> dict[str, Any]:
    """A run document's JSON text, read into what `run_rows` takes from it exactly as the json module reads
    it, by orjson (about a third less CPU) where the two agree. They differ on an integer literal outside 64
    bits, which orjson reads as a float: a document whose numbers that `run_rows` keeps (the inputs, version,
    revision, a step's attempt) include a float is read again by the json module, as is a text orjson refuses
    (NaN, a lone surrogate, 1e400). tests/test_store_rows.py compares the two."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
    if type(doc) is not dict or _has_float(doc.get("inputs")) or _kept_float(doc.get("version")) \
            or _kept_float(doc.get("revision")):
        return json.loads(text)
    if type(steps := doc.get("steps")) is dict:
        for st in steps.values():
            if type(st) is not dict or _kept_float(st.get("attempt")):
                return json.loads(text)
    return doc


def run_rows(text: str) -> tuple[RunRow, list[StepRow]]:
    """The `runs` row and the `steps` rows of one run document (JSON text)."""
    doc = read_doc(text)
    ended = doc.get("ended")
    run = new_row(RunRow, (run_id := doc["id"], doc["process"], doc["version"], doc["mode"], doc["state"],
                           doc.get("outcome"), doc["started_by"], doc["started_at"], updated_at := doc["updated_at"],
                           ended["at"] if ended else None,
                           ended["by"] if ended else None, ended.get("note") if ended else None,
                           stdlib_dumps(doc.get("inputs", {})), doc.get("revision", 0), text))
    steps = []
    for position, (step_id, st) in enumerate(doc.get("steps", {}).items()):
        get = st.get
        lease = get("lease")
        steps.append(new_row(StepRow, (run_id, step_id, st["kind"], position, get("state"), get("ready_since"),
                                       get("due"), get("attempt", 0), lease["claimant"] if lease else None,
                                       lease["expires_at"] if lease else None, updated_at)))
    return run, steps
