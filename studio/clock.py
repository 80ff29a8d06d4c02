"""Time for the engine: the wall clock live, a virtual clock for tests and simulation."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import lru_cache


@lru_cache(maxsize=1024)  # the same few instants are read again and again: a due date per view, lease expiries
def parse_time(text: str) -> datetime:
    """The instant an ISO 8601 text names (UTC when it names no zone). A datetime never changes, so a cached
    one is as good as a new one; an unparsable text raises every time (errors are not cached)."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@lru_cache(maxsize=256)  # one write formats the same few instants many times (every event, every field)
def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC with a Z, to the second (as the contract's examples)."""
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class Clock:
    def now(self) -> datetime:
        raise NotImplementedError

    def iso(self) -> str:
        return format_time(self.now())


class WallClock(Clock):
    def now(self) -> datetime:
        return datetime.now(UTC)

    def iso(self) -> str:  # `Clock.iso` without its second frame (every write and call-log row asks)
        return format_time(datetime.now(UTC))


class VirtualClock(Clock):
    """A clock that moves only when told: `advance(601)` makes leases expire on demand."""

    def __init__(self, start: str | datetime = "2026-10-06T09:00:00Z"):
        self._now = parse_time(start) if isinstance(start, str) else start.astimezone(UTC)
        self._listeners: list[Callable[[], None]] = []

    def now(self) -> datetime:
        return self._now

    def iso(self) -> str:  # `Clock.iso` without its second frame (a subclass with its own `now` needs its own `iso`)
        return format_time(self._now)

    def advance(self, seconds: float = 0, *, minutes: float = 0, hours: float = 0, days: float = 0) -> datetime:
        delta = timedelta(seconds=seconds, minutes=minutes, hours=hours, days=days)
        if delta.total_seconds() < 0:
            raise ValueError("a virtual clock only moves forward")
        self._now += delta
        for listener in list(self._listeners):
            listener()
        return self._now

    def set(self, moment: str | datetime) -> datetime:
        target = parse_time(moment) if isinstance(moment, str) else moment
        return self.advance((target - self._now).total_seconds())

    def on_advance(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)
