"""What several callers at once share on the durable path (docs/performance.md, "Group commit: where 8
threads' time goes"): ids drawn from one pool of os.urandom bytes, never the same twice, in threads or after a
fork.

Bounded: every thread is joined with a timeout; nothing here times anything."""

from __future__ import annotations

import os
import re
import threading

from studio.engine.machine import new_id


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
