"""What several callers at once share on the durable path (docs/performance.md, "Group commit: where 8
threads' time goes"): ids drawn from one pool of os.urandom bytes, never the same twice, in threads or after a
fork; and the journal's waking, where a finished commit opens two gates at most and each waiter it settled
opens the next one's.

Bounded: every thread is joined with a timeout; nothing here times anything."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from studio.engine.machine import new_id
from studio.store import journal as journal_module
from studio.store.journal import Journal, JournalError
from studio.store.rows import Record

JOIN_SECONDS = 30.0


def test_ids_drawn_by_many_threads_at_once_are_all_distinct() -> None:
    drawn: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def draw(mine: list[str]) -> None:
        start.wait(30)
        for _ in range(1500):  # about 3 refills of the pool each, racing with the others
            mine.append(new_id("r"))

    threads = [threading.Thread(target=draw, args=(mine,)) for mine in drawn]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    every = [i for mine in drawn for i in mine]
    assert len(every) == 8 * 1500 == len(set(every))
    assert all(re.fullmatch("r_[0-9a-f]{16}", i) for i in every)


def test_a_forked_child_does_not_repeat_the_parent_s_ids() -> None:
    new_id("r")  # the pool now holds ids the parent has not used yet
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(new_id("r") for _ in range(50)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    parent = {new_id("r") for _ in range(50)}
    assert len(child) == 50 and not child & parent


# -- waking: a commit opens two gates, its waiters open the rest (studio/store/journal.py `_wake`) -------------

class _Gate:
    """A waiter's gate that records which thread opened it."""

    def __init__(self, gate: Any, opened_by: list[tuple[int, int]], seq: int):
        self._gate, self._opened_by, self._seq = gate, opened_by, seq

    def acquire(self) -> bool:
        return self._gate.acquire()

    def release(self) -> None:
        self._opened_by.append((self._seq, threading.get_ident()))
        self._gate.release()


def _record(seq: int) -> Record:
    return Record(seq, [f'{{"id":"r{seq}","revision":1}}'], [], heads=[(f"r{seq}", 1)])


@pytest.mark.parametrize("fail", [False, True])
def test_a_commit_opens_two_gates_and_each_waiter_it_settled_opens_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: bool) -> None:
    """Records 1-4 are one group (the first waiter leads, three sleep), 5-7 queue behind it. When the
    group's commit ends (durable, or lost with everything after it), the leader opens only the gate of the
    next group's leader and of the first waiter it settled; that waiter opens the next one's, and so on:
    every waiter hears, none is left asleep, and each gate is opened once."""
    opened_by: list[tuple[int, int]] = []

    class Recorded(journal_module._Waiter):
        def __init__(self, seq: int):
            super().__init__(seq)
            self.gate = _Gate(self.gate, opened_by, seq)

    monkeypatch.setattr(journal_module, "_Waiter", Recorded)
    journal = Journal(str(tmp_path / "j.journal"), lambda records: None)
    started, release = threading.Event(), threading.Event()
    real = journal._write
    leader: list[int] = []

    def gated(group: list[Record], truncate: int) -> None:
        if not leader:
            leader.append(threading.get_ident())
            started.set()
            release.wait(JOIN_SECONDS)
            if fail:
                raise OSError("disk full")
        real(group, truncate)

    journal._write = gated  # type: ignore[method-assign]
    outcomes: dict[int, str] = {}

    def wait(seq: int) -> None:
        try:
            journal.wait(seq)
            outcomes[seq] = "durable" if journal.durable >= seq else "returned early"
        except JournalError:
            outcomes[seq] = "lost"

    for seq in range(1, 5):
        journal.append(_record(seq))
    first = [threading.Thread(target=wait, args=(seq,)) for seq in range(1, 5)]
    for t in first:
        t.start()
    assert started.wait(JOIN_SECONDS)
    for seq in range(5, 8):
        journal.append(_record(seq))
    later = [threading.Thread(target=wait, args=(seq,)) for seq in range(5, 8)]
    for t in later:
        t.start()
    for _ in range(3000):  # bounded: until the six others sleep on their gates
        if len(journal._waiters) == 6:
            break
        threading.Event().wait(0.01)
    assert len(journal._waiters) == 6
    asleep = sorted(w.seq for w in journal._waiters)
    release.set()
    for t in first + later:
        t.join(JOIN_SECONDS)
    try:
        assert not any(t.is_alive() for t in first + later), "a waiter hangs"
        expected = "lost" if fail else "durable"
        assert outcomes == {seq: expected for seq in range(1, 8)}
        assert sorted(seq for seq, _ in opened_by) == asleep  # each sleeper's gate opened exactly once
        by_leader = [seq for seq, ident in opened_by if ident == leader[0]]
        assert len(by_leader) <= 2  # the next leader and the first settled waiter, never the whole group
        assert journal._waiters == []
    finally:
        journal.close()
