"""Engine calls off the event loop, on a few long-lived threads, answered back in batches.

`Engine.call` blocks (its lock, a durable write waiting for the disk), so it never runs on the event
loop. anyio's `to_thread` costs, per call, a `queue.Queue` put (a condition variable written in Python),
a cancel scope, and one self-pipe write to wake the loop with the answer. Here a call is one
`SimpleQueue.put` (C) and an asyncio future; a worker that finishes a call while the loop has not yet
collected earlier answers adds its own to the same wake-up, so under load one self-pipe write answers
several calls. Several workers, so that several writes can wait for the disk at once (the store's group
commit covers them with one fsync); the engine decides what runs concurrently (its own lock).

A call that has started always finishes: a cancelled caller stops waiting only once its call is done,
as with anyio's default, so nothing an engine call does is ever cut off or left running unseen.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

import anyio

__all__ = ["EngineWorkers"]

T = TypeVar("T")

_STOP = None


# Enough threads for several durable writes to wait for the disk at once, few enough to stay cheap.
ENGINE_THREADS = 8


class EngineWorkers:
    """Up to `threads` worker threads, started on demand; `close()` ends them (a later call starts anew)."""

    def __init__(self, threads: int, name: str = "studio-engine"):
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.threads = threads
        self.name = name
        self._jobs: SimpleQueue[tuple[Any, ...] | None] = SimpleQueue()
        self._started: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()  # _started, _idle, _answers, _wake_pending
        self._answers: list[tuple[asyncio.Future[Any], bool, Any]] = []
        self._wake_pending: set[asyncio.AbstractEventLoop] = set()

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` on a worker thread; its result or exception here."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._submit((loop, future, function, args))
        cancelled: asyncio.CancelledError | None = None
        with anyio.CancelScope(shield=True):  # a started call is waited for, never abandoned (anyio's cancel)
            while not future.done():
                try:
                    await asyncio.shield(future)  # and asyncio's: the future itself is never cancelled
                except asyncio.CancelledError as exc:
                    cancelled = exc
                except BaseException:
                    break  # the call's own exception, raised below
        if cancelled is not None:
            raise cancelled
        return future.result()

    def close(self) -> None:
        """End the threads once they finish the calls they have (the server's shutdown)."""
        with self._lock:
            threads, self._started, self._idle = self._started, [], 0
        for _ in threads:
            self._jobs.put(_STOP)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout=10)

    # -- the calling side ----------------------------------------------------------------------------
    def _submit(self, job: tuple[Any, ...]) -> None:
        with self._lock:
            # A new thread only when none is idle and the pool is not full: the queue wakes an idle one.
            if self._idle == 0 and len(self._started) < self.threads:
                thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._started)}", daemon=True)
                self._started.append(thread)
                thread.start()
            else:
                self._idle = max(0, self._idle - 1)
        self._jobs.put(job)

    # -- the worker side -----------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            loop, future, function, args = job
            try:
                answer: tuple[asyncio.Future[Any], bool, Any] = (future, True, function(*args))
            except BaseException as exc:  # handed to the caller, as anyio does
                answer = (future, False, exc)
            self._answer(loop, answer)
            with self._lock:
                self._idle += 1

    def _answer(self, loop: asyncio.AbstractEventLoop, answer: tuple[asyncio.Future[Any], bool, Any]) -> None:
        with self._lock:
            self._answers.append(answer)
            if loop in self._wake_pending:
                return  # the loop will collect this answer with the ones before it
            self._wake_pending.add(loop)
        with contextlib.suppress(RuntimeError):  # a closed loop: its callers are gone
            loop.call_soon_threadsafe(self._deliver, loop)

    def _deliver(self, loop: asyncio.AbstractEventLoop) -> None:
        """On `loop`: settle every collected answer whose future belongs to it."""
        with self._lock:
            self._wake_pending.discard(loop)
            mine = [a for a in self._answers if a[0].get_loop() is loop]
            self._answers = [a for a in self._answers if a[0].get_loop() is not loop]
        for future, ok, value in mine:
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
