"""The journal (studio/store/journal.py): what a record reads back as, and group commit's waking (a
finished commit wakes only the waiters it settled and one waiter to lead the next group; on a failure
every waiter hears; no waiter is left asleep).

Bounded: every thread is joined with a timeout and must have ended; nothing here times anything."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from studio.store import journal as journal_module
from studio.store.journal import _ONE_STATEMENT, Journal, JournalError
from studio.store.rows import BlobRow, CallRow, EventRow, ProcessRow, Record, RefusalRow, RequestRow

JOIN_SECONDS = 30.0


class Counted(journal_module._Waiter):
    """Counts every time a caller goes to sleep in `wait`."""

    made = 0

    def __init__(self, seq: int):
        super().__init__(seq)
        Counted.made += 1


def _record(seq: int) -> Record:
    return Record(seq, [f'{{"id":"r{seq}","revision":1}}'], [], heads=[(f"r{seq}", 1)])


def test_every_row_reads_back_as_written(tmp_path: Path) -> None:
    """Rows are written as JSON arrays (orjson, or the json module for what orjson refuses: an integer past
    64 bits, a lone surrogate) and read back by `tail` to the same rows."""
    at = "2026-10-06T09:00:00Z"
    records = [
        Record(1, ['{"id":"r1","revision":1}'],
               [EventRow(1, at, "r1", None, "run_started", "u_mira", '{"name":"Zoë ✓"}'),
                EventRow(2, at, "r1", "check", "step_ready", None, "{}")],
               [ProcessRow("p", 1, "ab" * 32, "name: p\n", '{"name":"p"}', None, "p.yaml", at)],
               [BlobRow("f1", b"%PDF\x00\xff")], [RefusalRow("r1", "check", 1, '["output: x"]', at)],
               RequestRow("u_mira", "q-1", "start_run", "cd" * 32, '{"ok":true}', at),
               CallRow(1, at, "start_run", "u_mira", True, None, None, 0.25, "q-1", "r1", None, None, None, False),
               [("r1", 1)]),
        Record(2, ['{"id":"r2","revision":3}'],
               [EventRow(3, at, "r2", None, "note", "u\ud800", f'{{"n":{2**70}}}')],  # a lone surrogate
               call=CallRow(2, at, "get_run", "u", False, "invalid", '["runId: x"]', 1.5, None, None, None, None,
                            None, False), heads=[("r2", 3)]),
    ]
    journal = Journal(str(tmp_path / "j.journal"), lambda records: None)
    try:
        for record in records:
            journal.append(record)
        journal.wait(2)
        assert journal.tail(0) == records
    finally:
        journal.close()


def _until(condition: object, what: str) -> None:
    """Poll (bounded) until `condition()` holds: the threads of a test have reached their place."""
    for _ in range(3000):
        if condition():  # type: ignore[operator]
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"never reached: {what}")


def _join(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(JOIN_SECONDS)
    assert not any(t.is_alive() for t in threads), "a waiter hangs"


class Gated:
    """A journal whose first commit waits for `release` (so others queue behind it) and may then fail;
    every record reported durable is kept in order."""

    def __init__(self, path: Path, *, fail_first: bool = False):
        self.durable: list[int] = []
        self.journal = Journal(str(path), lambda records: self.durable.extend(r.seq for r in records))
        self.started = threading.Event()
        self.release = threading.Event()
        self.writes: list[list[int]] = []
        real = self.journal._write

        def gated(group: list[Record], truncate: int) -> None:
            self.writes.append([r.seq for r in group])
            if len(self.writes) == 1:
                self.started.set()
                self.release.wait(JOIN_SECONDS)
                if fail_first:
                    raise OSError("disk full")
            real(group, truncate)

        self.journal._write = gated  # type: ignore[method-assign]


def _queue_and_wait(journal: Journal, seq: int, outcomes: dict[int, str]) -> None:
    try:
        journal.wait(seq)
        outcomes[seq] = "durable" if journal.durable >= seq else "returned early"
    except JournalError:
        outcomes[seq] = "lost"


def test_a_commit_wakes_one_leader_for_the_next_group_and_no_one_needlessly(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_module, "_Waiter", Counted)
    Counted.made = 0
    gated = Gated(tmp_path / "j.journal")
    journal = gated.journal
    outcomes: dict[int, str] = {}
    journal.append(_record(1))
    leader = threading.Thread(target=_queue_and_wait, args=(journal, 1, outcomes))
    leader.start()
    assert gated.started.wait(JOIN_SECONDS)
    for seq in range(2, 7):  # queued while record 1 is being written: the next group
        journal.append(_record(seq))
    followers = [threading.Thread(target=_queue_and_wait, args=(journal, seq, outcomes)) for seq in range(2, 7)]
    for t in followers:
        t.start()
    _until(lambda: len(journal._waiters) == 5, "five waiters asleep")
    gated.release.set()
    _join([leader, *followers])
    try:
        assert outcomes == {seq: "durable" for seq in range(1, 7)}
        assert gated.writes == [[1], [2, 3, 4, 5, 6]]  # one leader took the whole next group
        assert gated.durable == list(range(1, 7))
        # each follower slept once: the first commit woke only the next group's leader, not the other four
        assert Counted.made == 5
        assert journal._waiters == []
    finally:
        journal.close()


def test_a_failed_commit_fails_every_waiter_of_it_and_after_it(tmp_path: Path) -> None:
    gated = Gated(tmp_path / "j.journal", fail_first=True)
    journal = gated.journal
    outcomes: dict[int, str] = {}
    for seq in (1, 2, 3):
        journal.append(_record(seq))
    first = [threading.Thread(target=_queue_and_wait, args=(journal, seq, outcomes)) for seq in (1, 2, 3)]
    for t in first:
        t.start()
    assert gated.started.wait(JOIN_SECONDS)
    for seq in (4, 5, 6):  # queued after the failing group: they may depend on it, so they are lost too
        journal.append(_record(seq))
    later = [threading.Thread(target=_queue_and_wait, args=(journal, seq, outcomes)) for seq in (4, 5, 6)]
    for t in later:
        t.start()
    _until(lambda: len(journal._waiters) == 5, "five waiters asleep behind the failing commit")
    gated.release.set()
    _join(first + later)
    try:
        assert outcomes == {seq: "lost" for seq in range(1, 7)}
        assert gated.writes == [[1, 2, 3]] and gated.durable == []
        assert journal._waiters == []
        with pytest.raises(JournalError):
            journal.append(_record(7))  # refused until reset
        journal.reset()
        journal.append(_record(7))
        journal.wait(7)
        assert gated.durable == [7]
        assert [r.seq for r in journal.tail(0)] == [7]
    finally:
        journal.close()


def test_many_threads_each_return_only_once_their_write_is_durable(tmp_path: Path) -> None:
    durable: list[int] = []
    journal = Journal(str(tmp_path / "j.journal"), lambda records: durable.extend(r.seq for r in records))
    commits = 0
    real = journal._write

    def counting(group: list[Record], truncate: int) -> None:
        nonlocal commits
        commits += 1
        real(group, truncate)

    journal._write = counting  # type: ignore[method-assign]
    order = threading.Lock()  # as the store's: numbered and queued under one lock, waited for outside it
    counter = 0
    early: list[int] = []

    def writer() -> None:
        nonlocal counter
        for _ in range(40):
            with order:
                counter += 1
                seq = counter
                journal.append(_record(seq))
            journal.wait(seq)
            if journal.durable < seq:
                early.append(seq)

    threads = [threading.Thread(target=writer) for _ in range(16)]
    for t in threads:
        t.start()
    _join(threads)
    try:
        assert early == []
        assert durable == list(range(1, 16 * 40 + 1))  # durable strictly in seq order, each once
        assert [r.seq for r in journal.tail(0)] == durable
        assert commits <= 16 * 40 and journal._waiters == []
    finally:
        journal.close()


def test_a_failure_under_many_threads_reaches_every_waiter(tmp_path: Path) -> None:
    """Writers keep queuing while one commit fails: each hears (durable or lost), none hangs, and the
    durable records are a prefix in seq order."""
    durable: list[int] = []
    journal = Journal(str(tmp_path / "j.journal"), lambda records: durable.extend(r.seq for r in records))
    real = journal._write
    writes = 0

    def third_fails(group: list[Record], truncate: int) -> None:
        nonlocal writes
        writes += 1
        if writes == 3:
            raise OSError("disk full")
        real(group, truncate)

    journal._write = third_fails  # type: ignore[method-assign]
    order = threading.Lock()
    counter = 0
    heard: dict[int, str] = {}

    def writer() -> None:
        nonlocal counter
        for _ in range(20):
            with order:
                seq = counter + 1
                try:
                    journal.append(_record(seq))
                except JournalError:  # the journal failed: refused, nothing queued
                    return
                counter = seq
            _queue_and_wait(journal, seq, heard)

    threads = [threading.Thread(target=writer) for _ in range(12)]
    for t in threads:
        t.start()
    _join(threads)
    try:
        assert sorted(heard) == list(range(1, counter + 1))
        assert "returned early" not in heard.values() and "lost" in heard.values()
        assert durable == [seq for seq in sorted(heard) if heard[seq] == "durable"] == list(range(1, len(durable) + 1))
        assert journal._waiters == []
    finally:
        journal.close()


# -- dropping what is materialised elsewhere (truncate_to) ---------------------------------------------------

def _sized(seq: int) -> Record:
    """A record of about the benchmark's size (a ~3 KB journal row, a blob on every fifth)."""
    doc = f'{{"id":"r{seq}","revision":1,"note":"{"x" * 2800}"}}'
    blobs = [BlobRow(f"f{seq}", b"%PDF" * 75)] if seq % 5 == 0 else []
    return Record(seq, [doc], [], blobs=blobs, heads=[(f"r{seq}", 1)])


def _write(journal: Journal, seq: int) -> None:
    journal.append(_sized(seq))
    journal.wait(seq)


def test_rows_are_deleted_by_one_commit_after_each_truncate_and_a_failed_one_is_retried(tmp_path: Path) -> None:
    journal = Journal(str(tmp_path / "j.journal"), lambda records: None)
    deletes: list[str] = []
    journal.conn.set_trace_callback(lambda sql: deletes.append(sql) if sql.startswith("DELETE") else None)
    try:
        for seq in range(1, 4):
            _write(journal, seq)
        assert deletes == []
        journal.truncate_to(2)
        _write(journal, 4)
        assert len(deletes) == 2  # the journal's rows and its blobs, in the commit of write 4
        for seq in range(5, 8):
            _write(journal, seq)
        assert len(deletes) == 2  # nothing more to delete: no later commit deletes again
        assert [r.seq for r in journal.tail(0)] == [3, 4, 5, 6, 7]

        journal.truncate_to(5)
        journal.fail_after_statements = 2  # the row goes in, the DELETEs fail: the whole commit rolls back
        journal.append(_sized(8))
        with pytest.raises(JournalError):
            journal.wait(8)
        journal.fail_after_statements = None
        journal.reset()
        assert [r.seq for r in journal.tail(0)] == [3, 4, 5, 6, 7]
        _write(journal, 9)  # the next commit deletes what the failed one did not
        assert [r.seq for r in journal.tail(0)] == [6, 7, 9]
    finally:
        journal.close()


def test_the_journal_files_stay_bounded_as_writes_are_materialised(tmp_path: Path) -> None:
    """Rows materialised elsewhere are dropped and SQLite checkpoints its WAL into the file as it goes, so
    neither file grows with the number of writes: 3,000 writes of ~3 KB (9 MB in all), 300 at a time
    materialised. The WAL stays near SQLite's auto-checkpoint (1,000 pages, 4 MB) plus one commit: with
    the freed pages overwritten (SECURE_DELETE), the commit that deleted 300 rows wrote them all again."""
    path = tmp_path / "j.journal"
    journal = Journal(str(path), lambda records: None)
    largest = {"journal": 0, "wal": 0}
    try:
        for seq in range(1, 3001):
            _write(journal, seq)
            if seq % 300 == 0:
                journal.truncate_to(seq - 10)  # the materialiser applied all but the last few
            for name, file in (("journal", path), ("wal", Path(f"{path}-wal"))):
                largest[name] = max(largest[name], file.stat().st_size if file.exists() else 0)
        assert [r.seq for r in journal.tail(0)][0] == 2691  # the last truncate (2990) waits for a commit
    finally:
        journal.close()
    assert largest["wal"] < 4096 * 1000 + 64 * 4096  # the auto-checkpoint's 1,000 pages and one commit
    assert largest["journal"] < 2 * 1024 * 1024  # ~320 live rows of ~3 KB, one per 4 KB page, and their blobs


def test_a_one_row_write_is_one_statement_and_anything_more_one_transaction(tmp_path: Path) -> None:
    """A write of one row or a group of rows (no blob, nothing to delete) is a single INSERT, its own
    transaction; a write with a blob, one that deletes, or a group past `_ONE_STATEMENT` rows, is BEGIN …
    COMMIT. A failure injected into the
    single statement leaves nothing, and the journal takes writes again after `reset`."""
    journal = Journal(str(tmp_path / "j.journal"), lambda records: None)
    statements: list[str] = []
    journal.conn.set_trace_callback(lambda sql: statements.append(sql.split()[0]))
    try:
        _write(journal, 1)
        assert statements == ["INSERT"]
        statements.clear()
        with_blob = _sized(2)
        with_blob.blobs.append(BlobRow("f2", b"%PDF"))
        journal.append(with_blob)
        journal.wait(2)
        assert statements == ["BEGIN", "INSERT", "INSERT", "COMMIT"]
        statements.clear()
        journal.append(_sized(3))
        journal.append(_sized(4))
        journal.wait(4)  # one group: both rows in one multi-row INSERT, one transaction
        assert statements == ["INSERT"]
        statements.clear()
        journal.truncate_to(1)
        _write(journal, 6)
        assert statements == ["BEGIN", "INSERT", "DELETE", "DELETE", "COMMIT"]

        journal.fail_after_statements = 1
        journal.append(_sized(7))
        with pytest.raises(JournalError):
            journal.wait(7)
        journal.fail_after_statements = None
        assert not journal.conn.in_transaction
        journal.reset()
        _write(journal, 8)
        assert [r.seq for r in journal.tail(0)] == [2, 3, 4, 6, 8]
        assert [b.id for r in journal.tail(0) for b in r.blobs] == ["f2"]

        statements.clear()  # a group past one statement's rows: one transaction, row by row
        big = [dataclasses.replace(_sized(seq), blobs=[]) for seq in range(9, 10 + _ONE_STATEMENT)]
        for record in big:
            journal.append(record)
        journal.wait(big[-1].seq)
        assert statements == ["BEGIN", *["INSERT"] * len(big), "COMMIT"]
        assert journal.tail(8) == big
        assert journal.tail(2)[:2] == [_sized(3), _sized(4)]  # the multi-row INSERT's rows read back as written
    finally:
        journal.close()
