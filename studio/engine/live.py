"""Indexes over the live runs, kept by the one place that installs a committed run (`Engine._keep`), so that
no call pays for the number of open runs:

- `Expiries`: each live run's earliest lease expiry, and the earliest of all from a heap (a write that
  changes a lease costs O(log n), not a scan of every live run);
- `WorkIndex`: the ready agent steps by the agents that may claim them, the open work items by the group or
  person they are assigned to. `get_work` reads only its caller's entries, with the same rules as
  `access.may_claim` and `access.is_assigned` (a test compares it with a scan of every live run).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import datetime

from studio.definition.model import Process
from studio.directory import Identity

from .state import RunState

ANY_AGENT = "*"  # an agent step that names no agents: any agent may claim it


class Expiries:
    """Run id -> its earliest lease expiry, and the earliest of all. The heap may hold entries a later write
    replaced (skipped when they come to the top; rebuilt when they outnumber the live ones)."""

    def __init__(self) -> None:
        self._when: dict[str, datetime] = {}
        self._heap: list[tuple[datetime, str]] = []

    def set(self, run_id: str, expiry: datetime | None) -> None:
        if expiry is None:
            self.pop(run_id)
        elif self._when.get(run_id) != expiry:
            self._when[run_id] = expiry
            heapq.heappush(self._heap, (expiry, run_id))
            self._bound()

    def pop(self, run_id: str) -> None:
        if self._when.pop(run_id, None) is not None:
            self._bound()

    def _bound(self) -> None:
        """Memory bounded by the live leases: rebuilt once replaced entries outnumber them (amortised O(1))."""
        if len(self._heap) > 2 * len(self._when) + 64:
            self._heap = [(when, rid) for rid, when in self._when.items()]
            heapq.heapify(self._heap)

    def earliest(self) -> datetime | None:
        heap = self._heap
        while heap:
            expiry, run_id = heap[0]
            if self._when.get(run_id) == expiry:
                return expiry
            heapq.heappop(heap)
        return None

    def items(self) -> list[tuple[str, datetime]]:
        return list(self._when.items())

    def __len__(self) -> int:
        return len(self._when)


Audience = tuple[str, str]  # ("group", id) or ("person", lower-cased email)


class WorkIndex:
    """The live runs' offers (ready agent steps) and open work items, by who may take them."""

    def __init__(self) -> None:
        self._offers: dict[str, dict[tuple[str, str], RunState]] = {}  # agent id or ANY_AGENT -> (run, step)
        self._inbox: dict[Audience, dict[tuple[str, int], RunState]] = {}  # audience -> (run, position)
        self._placed: dict[str, list[tuple[dict, tuple[str, object]]]] = {}  # run id -> its entries, to drop

    def put(self, run: RunState, process: Process) -> None:
        """The run's entries as of this committed state (a live run)."""
        # The run's fields from its `__dict__`, one read per model: pydantic's `__getattr__` hook makes each
        # attribute read of a model a slow lookup (as in views.py); after every write of a live run.
        fields = run.__dict__
        run_id = fields["id"]
        self.drop(run_id)
        placed: list[tuple[dict, tuple[str, object]]] = []
        steps = fields["steps"]
        for step_id, agents in process.agent_claimants:
            if steps[step_id].__dict__["state"] == "ready":
                key = (run_id, step_id)
                for agent in (ANY_AGENT,) if agents is None else agents:
                    entries = self._offers.get(agent)
                    if entries is None:
                        entries = self._offers[agent] = {}
                    entries[key] = run
                    placed.append((entries, key))
        for position, item in enumerate(fields["work_items"]):
            audience = _audience(item.__dict__["assigned"])
            if audience is not None:
                inbox = self._inbox.get(audience)
                if inbox is None:
                    inbox = self._inbox[audience] = {}
                inbox[(run_id, position)] = run
                placed.append((inbox, (run_id, position)))
        if placed:
            self._placed[run_id] = placed

    def drop(self, run_id: str) -> None:
        for entries, key in self._placed.pop(run_id, ()):
            entries.pop(key, None)

    def offers(self, agent_id: str) -> Iterator[tuple[RunState, str]]:
        """(run, step id) of every ready agent step this agent may claim (`access.agent_may_claim`)."""
        for who in (agent_id, ANY_AGENT):
            for (_, step_id), run in list(self._offers.get(who, {}).items()):
                yield run, step_id

    def items(self, ident: Identity) -> Iterator[tuple[RunState, int]]:
        """(run, position) of every open work item assigned to this caller (`access.is_assigned`)."""
        audiences: list[Audience] = [("group", g) for g in ident.groups]
        if ident.email:
            audiences.append(("person", ident.email.lower()))
        for audience in dict.fromkeys(audiences):
            for (_, position), run in list(self._inbox.get(audience, {}).items()):
                yield run, position


def _audience(assigned: dict[str, str]) -> Audience | None:
    if "group" in assigned:
        return ("group", assigned["group"])
    person = assigned.get("person")
    return ("person", person.lower()) if person else None
