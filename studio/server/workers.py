"""Engine calls off the event loop, on a few long-lived threads, answered back in batches.

`Engine.call` blocks (its lock, a durable write waiting for the disk), so it never runs on the event
loop. anyio's `to_thread` costs, per call, a `queue.Queue` put (a condition variable written in Python),
a cancel scope, and one self-pipe write to wake the loop with the answer. Here a call is one
`SimpleQueue.put` (C) and an asyncio future; a worker that finishes a call while the loop has not yet
collected earlier answers adds its own to the same wake-up, so under load one self-pipe write answers
several calls. Several workers, so that several writes can wait for the disk at once (the store's group
commit covers them with one fsync); the engine decides what runs concurrently (its own lock).

No lock on the way in or out: the loop and the workers share only C-level atomic operations (a
`SimpleQueue`, a `deque`'s append and popleft, a flag). A lock here was taken three times per call, and a
worker holding it while it waited for the GIL made the event loop wait in turn (docs/performance.md).

A call that has started always finishes: a cancelled caller stops waiting only once its call is done,
as with anyio's default, so nothing an engine call does is ever cut off or left running unseen.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

import anyio

__all__ = ["ENGINE_THREADS", "EngineWorkers"]

T = TypeVar("T")

_STOP = None

# Enough threads for several durable writes to wait for the disk at once, few enough to stay cheap.
ENGINE_THREADS = 8

# (future, ok, result or exception)
_Answer = tuple["asyncio.Future[Any]", bool, Any]


class _Inbox:
    """The answers waiting for one event loop, and whether a wake-up for them is already on its way.

    Workers append then look at `waking`; the loop clears `waking` then drains, so an answer appended
    after a drain always finds `waking` clear and schedules the next one (at worst a wake-up finds
    nothing to do)."""

    __slots__ = ("answers", "loop", "waking")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.answers: deque[_Answer] = deque()
        self.waking = False


class EngineWorkers:
    """Up to `threads` worker threads, started on demand; `close()` ends them (a later call starts anew)."""

    def __init__(self, threads: int, name: str = "studio-engine"):
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.threads = threads
        self.name = name
        self._jobs: SimpleQueue[tuple[_Inbox, asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = \
            SimpleQueue()
        self._started: list[threading.Thread] = []
        self._start_lock = threading.Lock()  # only to start or stop the threads, never per call
        self._inboxes: dict[asyncio.AbstractEventLoop, _Inbox] = {}
        # Calls submitted and not yet answered, counted on the calling side: a thread is started when there
        # are more than threads (one client calling in turn keeps one thread). Only an estimate if several
        # event loops share these workers; at worst a thread starts early or late, never a call is lost.
        self._busy = 0

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` on a worker thread; its result or exception here."""
        loop = asyncio.get_running_loop()
        inbox = self._inboxes.get(loop)
        if inbox is None:
            inbox = self._inboxes.setdefault(loop, _Inbox(loop))
        future: asyncio.Future[T] = loop.create_future()
        self._busy += 1
        if self._busy > len(self._started):
            self._start()
        self._jobs.put((inbox, future, function, args))
        try:
            return await asyncio.shield(future)  # the future itself is never cancelled by its caller's cancel
        except asyncio.CancelledError as cancelled:
            # Cancelled (by asyncio or by an anyio scope) while the call runs: wait for it in a shielded
            # scope, so anyio does not cancel this task again at every step, then report the cancel.
            # The scope is entered only here, on the rare cancel: it costs ~5% of a call's loop time.
            with anyio.CancelScope(shield=True):
                while not future.done():
                    with contextlib.suppress(BaseException):
                        await asyncio.shield(future)
            raise cancelled from None
        finally:
            self._busy -= 1

    def close(self) -> None:
        """End the threads once they finish the calls they have (the server's shutdown)."""
        with self._start_lock:
            threads, self._started = self._started, []
            self._inboxes.clear()  # a loop that served calls is not kept alive by them
        for _ in threads:
            self._jobs.put(_STOP)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout=10)

    def _start(self) -> None:
        with self._start_lock:
            if len(self._started) < self.threads:
                thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._started)}", daemon=True)
                thread.start()
                self._started.append(thread)

    # -- the worker side -----------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            inbox, future, function, args = job
            try:
                answer: _Answer = (future, True, function(*args))
            except BaseException as exc:  # handed to the caller, as anyio does
                answer = (future, False, exc)
            inbox.answers.append(answer)
            if not inbox.waking:
                inbox.waking = True
                with contextlib.suppress(RuntimeError):  # a closed loop: its callers are gone
                    inbox.loop.call_soon_threadsafe(self._deliver, inbox)

    @staticmethod
    def _deliver(inbox: _Inbox) -> None:
        """On the inbox's loop: settle every answer collected so far."""
        inbox.waking = False  # before draining: an answer added from now on schedules its own wake-up
        answers = inbox.answers
        while answers:
            future, ok, value = answers.popleft()
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
