"""Batch simulation: a discrete-event simulation that drives `n` runs through `Engine.call` on a virtual clock.

Every move goes through the 14 tools, so every rule of the engine applies (leases, checks, snapshots, rewinds).
Between events the engine's clock jumps to the next event's time. Agents pick up work with get_work + claim and
people with get_work + decide; when every worker of a group is busy, work queues (FIFO on readySince / item
creation, the order get_work returns), so waiting times come from queueing, not from adding up delays.
"""

from __future__ import annotations

import base64
import heapq
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from tqdm.auto import tqdm

from studio import starter
from studio.clock import VirtualClock, parse_time
from studio.contract import NOTE_REQUIRED, WRITE_TOOLS, assert_valid_result
from studio.definition import AgentStep, Process, TaskStep, WaitForStep, load_file, load_text
from studio.directory import Directory
from studio.engine import Engine
from studio.engine.access import agent_may_claim
from studio.store import Store
from studio.store.retention import DEFAULT_REQUEST_RETENTION

from .behaviour import Behaviour, BehaviourError, Context, generate, parse_gen

DEFAULT_START = "2026-10-06T09:00:00Z"
PROGRESS_MIN_RUNS = 500  # below this a simulation takes seconds: no progress bar unless asked
REQUESTER = "u_requester"
REQUESTER_EMAIL = "requester@sim.example"
GENERIC_AGENT = "a_sim"
UNLIMITED = 1_000_000  # the initiator of each run answers their own items: no queue


# -- what the simulation records ------------------------------------------------------------------------
@dataclass
class Work:
    """One piece of work by one worker (an agent's claim, a person's decision, an awaited event)."""

    run_id: str
    step_id: str
    kind: str  # agent | task | approve | escalation | wait_for
    resource: str  # agent id, group id, person email or event:NAME
    worker: str | None
    attempt: int
    ready_at: float
    started_at: float
    due_at: float | None = None
    ended_at: float | None = None
    result: str | None = None
    rework: list[str] = field(default_factory=list)  # not_accepted, stale_snapshot, ...


@dataclass
class Worker:
    id: str  # the identity that calls the tools
    kind: str  # agent | person
    slots: int
    resources: list[str]  # groups / agent id it serves (for utilisation)
    busy: int = 0
    busy_seconds: float = 0.0
    free_since: float = 0.0
    backlog: bool = True  # its last look at get_work left work it could not take: look again when free

    @property
    def free(self) -> int:
        return self.slots - self.busy


@dataclass
class _AgentJob:
    worker: Worker
    work: Work
    token: str
    expires: float
    plan: str  # submit | escalate | crash
    invalid: bool
    route: str | None
    overrides: dict[str, Any]
    action_at: float = 0.0
    done: bool = False


@dataclass
class _PersonJob:
    worker: Worker
    work: Work
    item_id: str
    snapshot: str
    decision: str
    route: str | None


# -- process, directory, engine --------------------------------------------------------------------------
def _process_dirs() -> list[Path]:
    """Where a process named by name is looked for: this folder's processes/, then the bundled examples."""
    return [Path.cwd() / "processes", starter.bundled_processes()]


def resolve_process(process: str | Path | Process) -> tuple[str, str]:
    """(label, yaml_text) of a path, a process name among processes/, or YAML text."""
    if isinstance(process, Path) or (isinstance(process, str) and "\n" not in process
                                     and process.endswith((".yaml", ".yml"))):
        path = Path(process)
        return str(path), path.read_text(encoding="utf-8")
    text = str(process)
    if "\n" in text or ":" in text:
        return "<simulated process>", text
    for folder in _process_dirs():
        candidate = folder / f"{text}.yaml"
        if candidate.exists():
            return str(candidate), candidate.read_text(encoding="utf-8")
        if folder.is_dir():
            for path in sorted(folder.glob("*.y*ml")):
                if path.name == "directory.yaml":
                    continue
                loaded = load_file(path)
                if loaded.process is not None and loaded.process.name == text:
                    return str(path), loaded.source
    raise FileNotFoundError(f"no process '{text}': expected a path, a process name in processes/, or YAML text")


def synthesize_directory(process: Process, capacity: Mapping[str, int]) -> Directory:
    """The agents the steps name, one person per capacity slot per group (u_g_finance_1, ...), the operators."""
    agents: list[str] = []
    groups: list[str] = []
    generic = False

    def add(seq: list[str], value: str) -> None:
        if value not in seq:
            seq.append(value)

    for step in process.steps:
        if step.kind == "agent":
            if step.agents is None:  # type: ignore[attr-defined]
                generic = True
            for agent in step.agents or []:  # type: ignore[attr-defined]
                add(agents, agent)
        for key in ("assign", "escalate_to"):
            assignment = getattr(step, key, None)
            if assignment is not None and assignment.group:
                add(groups, assignment.group)
    if generic:
        add(agents, GENERIC_AGENT)
    add(groups, "g_operators")
    people = [{"id": REQUESTER, "email": REQUESTER_EMAIL, "name": "Simulated requester", "groups": []}]
    for group in groups:
        for i in range(1, int(capacity.get(group, 1)) + 1):
            pid = f"u_{group}_{i}"
            people.append({"id": pid, "email": f"{pid}@sim.example", "groups": [group]})
    return Directory.load({"people": people, "agents": [{"id": a} for a in agents],
                           "groups": [{"id": g} for g in groups], "operators": "g_operators"})


def seeded_ids(seed: int) -> Callable[[str], str]:
    """Ids that repeat for a seed: prefix + 16 hex digits from a stream of their own."""
    rng = random.Random(f"{seed}:ids")

    def ids(prefix: str) -> str:
        return f"{prefix}_{rng.getrandbits(64):016x}"
    return ids


def open_engine(directory: Directory, db: str | Path, start: str, lease_seconds: int, seed: int) -> Engine:
    try:  # a throwaway database needs no per-write journal, when the store offers that
        store = Store(str(db), durable=False)  # type: ignore[call-arg]
    except TypeError:
        store = Store(str(db))
    # The ids and request ids of a seed repeat (that is what makes a simulation reproducible), so a file
    # that already holds runs would get a second run under an id it has, and replays of another
    # simulation's answers: refused before anything is written.
    held = store.fetchall("SELECT count(*) FROM runs")[0][0]
    if held:
        store.close()
        raise ValueError(f"simulate: {db} already holds {held} runs; a simulation needs a database of its own "
                         "(':memory:' or a new file)")
    # Virtual time passes hours in a few calls, and each prune is two DELETEs on the store: pruned every
    # hour, a 10,000-run simulation takes ~43 s instead of 24 (398 s when a prune materialised the store
    # first). Once per window is enough here.
    return Engine(store, directory, VirtualClock(start), lease_seconds=lease_seconds, ids=seeded_ids(seed),
                  prune_every=DEFAULT_REQUEST_RETENTION)


# -- the simulation --------------------------------------------------------------------------------------
class Simulator:
    """Drives runs of one process version on an engine with a virtual clock. `run()` -> SimulationResult."""

    def __init__(self, engine: Engine, process: str, *, n: int, behaviour: Behaviour | Mapping[str, Any] | str | None,
                 capacity: Mapping[str, int] | None = None, seed: int = 0, version: int | None = None,
                 until: float | None = None, validate: bool = False, progress: bool | None = None):
        if not isinstance(engine.clock, VirtualClock):
            raise ValueError("a simulation needs an engine on a VirtualClock")
        self.engine = engine
        self.clock: VirtualClock = engine.clock
        self.name = process
        self.version = version or engine.versions(process)[-1]
        self.process: Process = engine.process(process, self.version)
        self.behaviour = Behaviour.load(behaviour).check(self.process)
        self.n = int(n)
        self.seed = seed
        self.until = until
        self.validate = validate
        self.progress = self.n >= PROGRESS_MIN_RUNS if progress is None else progress
        self.t0: datetime = self.clock.now()
        self.lease = engine.lease_seconds
        self._rngs: dict[str, random.Random] = {}
        self._heap: list[tuple[float, int, str, Any]] = []
        self._seq = 0
        self._rid = 0
        self.now = 0.0
        directory = engine.directory
        self.operators = directory.operators
        self.starter = self._starter(directory)
        self.workers = self._workers(directory, dict(capacity or {}))
        self._by_group: dict[str, list[Worker]] = {}
        self._by_email: dict[str, Worker] = {}
        self._agents: dict[str, Worker] = {}
        for worker in self.workers.values():
            if worker.kind == "agent":
                self._agents[worker.id] = worker
            else:
                ident = directory.identity(worker.id)
                for group in worker.resources:  # the groups it is at work for
                    self._by_group.setdefault(group, []).append(worker)
                if ident is not None and ident.email:
                    self._by_email[ident.email.lower()] = worker
        self.event_sender = self._event_sender(directory)
        self._dirty: set[str] = set(self.workers)
        self._seen_ready: set[tuple[str, str, int, str | None]] = set()
        self._seen_items: set[str] = set()
        self._taken: set[str] = set()
        self._awaited: set[tuple[str, str, str | None]] = set()
        self.started = 0
        self.active: set[str] = set()
        self.runs: dict[str, dict[str, Any]] = {}
        self.log: list[Work] = []
        self.calls: dict[str, int] = {}
        self._problem_counts: dict[str, int] = {}
        self._problem_first: dict[str, float] = {}

    # -- set-up ----------------------------------------------------------------------------------------
    def _starter(self, directory: Directory) -> str:
        wanted = self.behaviour.started_by
        if wanted is not None:
            if directory.identity(wanted) is None:
                raise BehaviourError([f"started_by: {wanted} is not in the directory"])
            return wanted
        if directory.identity(REQUESTER) is not None:
            return REQUESTER
        # someone who is not an operator and does none of this process's group work, else any non-operator
        busy = {getattr(s, k).group for s in self.process.steps for k in ("assign", "escalate_to")
                if getattr(s, k, None) is not None and getattr(s, k).group}
        people = [p for p in directory.people if directory.operators not in p.groups]
        for person in people:
            if not busy & set(person.groups):
                return person.id
        if people:
            return people[0].id
        if directory.people:
            return directory.people[0].id
        if directory.agents and not self.process.has_initiator_step:
            return directory.agents[0].id
        raise BehaviourError(["started_by: the directory has nobody who may start a run"])

    def _event_sender(self, directory: Directory) -> str:
        operators = [p.id for p in directory.people if directory.operators in p.groups]
        if operators:
            return operators[0]
        if directory.agents:
            return directory.agents[0].id
        return self.starter

    def _workers(self, directory: Directory, capacity: dict[str, int]) -> dict[str, Worker]:
        """Agents with `capacity[agent]` slots (default 1); per group the first `capacity[group]` people."""
        merged = {**self.behaviour.capacity, **capacity}
        known = {a.id for a in directory.agents} | {g.id for g in directory.groups} | {p.id for p in directory.people}
        known |= {g for p in directory.people for g in p.groups}
        unknown = sorted(k for k in merged if k not in known)
        if unknown:
            raise BehaviourError([f"capacity.{k}: no such agent, group or person in the directory" for k in unknown])
        workers: dict[str, Worker] = {}
        for agent in directory.agents:
            slots = int(merged.get(agent.id, 1))
            if slots > 0:
                workers[agent.id] = Worker(agent.id, "agent", slots, [agent.id])
        on_duty: dict[str, list[str]] = {}
        groups = sorted({g for p in directory.people for g in p.groups})
        for group in groups:
            members = sorted(p.id for p in directory.people if group in p.groups)
            limit = int(merged.get(group, len(members)))
            for pid in members[:limit]:
                on_duty.setdefault(pid, []).append(group)
        for person in directory.people:
            if person.id == REQUESTER:
                # the initiator of each run is a different person in reality: answer at once, in parallel
                workers[person.id] = Worker(person.id, "person", UNLIMITED, [person.email])
            elif (person.id in on_duty or person.id == self.starter) and int(merged.get(person.id, 1)) > 0:
                # the starter also answers what is assigned to the initiator, or to its email
                workers[person.id] = Worker(person.id, "person", 1, on_duty.get(person.id, []))
        return workers

    def rng(self, purpose: str, run_id: str | None = None) -> random.Random:
        """One random stream per purpose, and per run for a step's draws: changing one step's behaviour, or the
        capacity (which changes the order work is done in), leaves every other draw of every run alone."""
        info = self.runs.get(run_id) if run_id else None
        table, key = (self._rngs, purpose) if info is None else (info.setdefault("rngs", {}), f"{purpose}:{info['n']}")
        found = table.get(key)
        if found is None:
            found = table[key] = random.Random(f"{self.seed}:{key}")
        return found

    # -- plumbing --------------------------------------------------------------------------------------
    def at(self, text: str | None) -> float | None:
        return None if text is None else (parse_time(text) - self.t0).total_seconds()

    def schedule(self, when: float, kind: str, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, kind, payload))

    def call(self, caller: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        if tool in WRITE_TOOLS:
            self._rid += 1
            args = {**args, "requestId": f"sim-{self.seed}-{self._rid}"}
        self.calls[tool] = self.calls.get(tool, 0) + 1
        envelope = self.engine.call(caller, tool, args)
        if self.validate:
            assert_valid_result(tool, envelope)
        return envelope

    def problem(self, text: str) -> None:
        """Something the simulation could not do as asked: each kind once, with how often it happened."""
        count = self._problem_counts.get(text, 0) + 1
        self._problem_counts[text] = count
        if count == 1:
            self._problem_first[text] = self.now

    @property
    def problems(self) -> list[str]:
        return [f"{text} (first at {self._problem_first[text] / 3600:.2f}h" + (f", {n} times)" if n > 1 else ")")
                for text, n in self._problem_counts.items()]

    def ctx(self, run_id: str | None, rng: random.Random, **extra: Any) -> Context:
        info = self.runs.get(run_id or "", {})
        data = self.engine.run_state(run_id).data_steps if run_id else {}
        return Context(inputs=info.get("inputs", {}), rng=rng, n=info.get("n", 0), run_id=run_id,
                       now=self.clock.now(), data=data, **extra)

    # -- the loop --------------------------------------------------------------------------------------
    def run(self) -> Any:
        from .result import SimulationResult

        if self.n > 0:
            self.schedule(0.0, "arrive", None)
        with tqdm(total=self.n, unit="run", desc=f"simulate {self.name}", disable=not self.progress,
                  leave=False) as bar:
            while self._heap:
                when, _, kind, payload = heapq.heappop(self._heap)
                if self.until is not None and when > self.until:
                    break
                if when > self.now:
                    self.clock.set(self.t0 + timedelta(seconds=when))
                    self.now = when
                getattr(self, f"_on_{kind}")(payload)
                self.dispatch()
                if self.started != bar.n:  # arrivals so far (tqdm.auto: a widget in a notebook)
                    bar.update(self.started - bar.n)
                if self.started >= self.n and not self.active:
                    break
        if self.until is not None and self.now < self.until and (self.started < self.n or self.active):
            self.clock.set(self.t0 + timedelta(seconds=self.until))  # runs still open: the clock goes on
            self.now = self.until
        for work in self.log:  # work still in hand when the simulation stops
            if work.ended_at is None and work.worker in self.workers:
                self.workers[work.worker].busy_seconds += self.now - work.started_at
        return SimulationResult.build(self)

    def dispatch(self) -> None:
        """Free workers with possibly new work look for it, longest idle first."""
        while self._dirty:
            dirty, self._dirty = self._dirty, set()
            ready = []
            for wid in dirty:
                worker = self.workers[wid]
                if worker.free > 0:
                    ready.append(worker)
                else:
                    worker.backlog = True  # new work came while it was busy: it looks once it is free
            if not ready:
                return
            for worker in sorted(ready, key=lambda w: (w.free_since, w.id)):
                if worker.free > 0:
                    (self._poll_agent if worker.kind == "agent" else self._poll_person)(worker)

    # -- observing runs after every write --------------------------------------------------------------
    def observe(self, run_id: str) -> None:
        run = self.engine.run_state(run_id)
        if run.is_ended:
            if run_id in self.active:
                self.active.discard(run_id)
                info = self.runs[run_id]
                info.update(ended_at=self.now, state=run.state, outcome=run.outcome)
                info.pop("rngs", None)  # its streams are done with
            return
        for step_id, st in run.steps.items():
            if st.state == "ready" and st.kind == "agent":
                key = (run_id, step_id, st.attempt, st.ready_since)
                if key not in self._seen_ready:
                    self._seen_ready.add(key)
                    step = self.process.step(step_id)
                    self._dirty.update(a for a in self._agents if agent_may_claim(a, step))
            elif st.state == "waiting" and st.kind == "wait_for":
                key2 = (run_id, step_id, st.ready_since)
                if key2 not in self._awaited:
                    self._awaited.add(key2)
                    self._await_event(run_id, step_id, st.ready_since, st.due, st.attempt)
        for item in run.work_items:
            if item.id not in self._seen_items:
                self._seen_items.add(item.id)
                self._mark_assigned(item.assigned)

    def _mark_assigned(self, assigned: Mapping[str, str]) -> None:
        if "group" in assigned:
            workers = self._by_group.get(assigned["group"], [])
            if not workers:
                self.problem(f"nobody of {assigned['group']} is at work: its items wait forever")
            # one new item wakes one free person (the longest idle), not the whole group: the others
            # would only find it taken. Nobody free: whoever frees up first looks.
            free = sorted((w for w in workers if w.free > 0 and w.id not in self._dirty),
                          key=lambda w: (w.free_since, w.id))
            if free and len(free[0].resources) == 1:
                self._dirty.add(free[0].id)
            elif free:  # someone who also works for other groups might take other work: wake them all
                self._dirty.update(w.id for w in free)
            for worker in workers:
                if worker.free <= 0:
                    worker.backlog = True
        elif "person" in assigned:
            person = self._by_email.get(str(assigned["person"]).lower())
            if person is None:
                self.problem(f"nobody in the directory has the email {assigned['person']}: its items wait forever")
            else:
                self._dirty.add(person.id)

    # -- arrivals --------------------------------------------------------------------------------------
    def _on_arrive(self, _: Any) -> None:
        self.started += 1
        index = self.started
        rng = self.rng("inputs")
        ctx = Context(inputs={}, rng=rng, n=index, now=self.clock.now())
        inputs: dict[str, Any] = {}
        ctx.inputs = inputs  # input generators see the inputs made so far
        generate(self.behaviour.inputs, self.process.input_specs, ctx, into=inputs)
        envelope = self.call(self.starter, "start_run", {"process": self.name, "version": self.version,
                                                         "inputs": inputs})
        if envelope["ok"]:
            run_id = envelope["data"]["run"]["id"]
            self.runs[run_id] = {"n": index, "inputs": inputs, "started_at": self.now, "ended_at": None,
                                 "state": None, "outcome": None}
            self.active.add(run_id)
            self.observe(run_id)
        else:
            self.problem(f"start_run refused: {envelope['error']}")
        if self.started < self.n:
            gap = self.behaviour.arrivals.sample(self.rng("arrivals"), ctx)
            self.schedule(self.now + (gap or 0.0), "arrive", None)

    # -- agents ----------------------------------------------------------------------------------------
    def _poll(self, worker: Worker, limit: int, take: Callable[[dict[str, Any]], bool]) -> None:
        """Page through the worker's get_work; `take(item)` works an item, False when it was not ours."""
        cursor = None
        worker.backlog = False
        while True:
            args: dict[str, Any] = {"limit": min(100, limit), "process": self.name}
            if cursor:
                args["cursor"] = cursor
            envelope = self.call(worker.id, "get_work", args)
            if not envelope["ok"]:
                self.problem(f"get_work refused for {worker.id}: {envelope['error']}")
                return
            for item in envelope["data"]["items"]:
                if worker.free <= 0 and self._ours(worker, item):
                    worker.backlog = True  # more waiting than it can take now
                    return
                take(item)
            cursor = envelope["data"]["nextCursor"]
            if not cursor:
                return
            if worker.free <= 0:
                worker.backlog = True  # unread pages: there may be more
                return

    def _ours(self, worker: Worker, entry: dict[str, Any]) -> bool:
        """Not another simulation's (or a real) run, not taken, and for a group this worker is at work for."""
        if "workItem" not in entry:
            return entry["runId"] in self.runs and entry["version"] == self.version
        item = entry["workItem"]
        group = item["assignedTo"].get("group")
        return (item["id"] not in self._taken and (group is None or group in worker.resources)
                and entry["runId"] in self.runs)

    def _poll_agent(self, worker: Worker) -> None:
        def take(item: dict[str, Any]) -> bool:
            if not self._ours(worker, item):
                return False
            self._claim(worker, item)
            return True

        self._poll(worker, worker.free, take)

    def _claim(self, worker: Worker, item: dict[str, Any]) -> None:
        run_id, step_id = item["runId"], item["stepId"]
        envelope = self.call(worker.id, "claim", {"runId": run_id, "stepId": step_id})
        if not envelope["ok"]:
            self.problem(f"claim of {step_id} by {worker.id} refused: {envelope['error'].get('issues')}")
            return
        data = envelope["data"]
        st = self.engine.run_state(run_id).steps[step_id]
        work = Work(run_id, step_id, "agent", worker.id, worker.id, st.attempt, self.at(item["readySince"]) or 0.0,
                    self.now, self.at(st.due))
        self.log.append(work)
        self._take(worker)
        b, agent = self.behaviour, worker.id
        rng = self.rng(f"step:{step_id}", run_id)
        ctx = self.ctx(run_id, rng, step_id=step_id, attempt=st.attempt, actor=agent)
        crash = b.agent_setting(step_id, agent, "crash").draw(rng, ctx)
        escalate = b.agent_setting(step_id, agent, "escalate").draw(rng, ctx)
        invalid = b.agent_setting(step_id, agent, "invalid").draw(rng, ctx)
        fails = b.agent_setting(step_id, agent, "fails_check")
        overrides = dict(fails.output) if fails is not None and fails.probability.draw(rng, ctx) else {}
        step = self.process.step(step_id)
        route = None
        if step.routes:
            mix = b.step(step_id).routes
            route = mix.choose(rng, ctx) if mix is not None else step.routes[0].to
        seconds = b.agent_setting(step_id, agent, "work").sample(rng, ctx) or 0.0
        plan = "crash" if crash else "escalate" if escalate else "submit"
        job = _AgentJob(worker, work, data["token"], self.at(data["expiresAt"]) or 0.0, plan, invalid, route,
                        overrides)
        self._act_at(job, self.now + seconds)

    def _act_at(self, job: _AgentJob, when: float) -> None:
        """Do the job's next move at `when`; renew the lease at half-life while the work goes on."""
        job.action_at = when
        self.schedule(when, "agent", job)
        self._plan_renew(job)

    def _plan_renew(self, job: _AgentJob) -> None:
        renew_at = job.expires - self.lease / 2
        if job.action_at > renew_at:
            self.schedule(max(renew_at, self.now), "renew", (job, job.expires))

    def _on_renew(self, payload: tuple[_AgentJob, float]) -> None:
        job, expires = payload
        if job.done or expires != job.expires:
            return
        envelope = self.call(job.worker.id, "renew", {"token": job.token,
                                                      "progress": f"simulated progress at {self.clock.iso()}"})
        if not envelope["ok"]:
            self.problem(f"renew refused for {job.work.step_id}: {envelope['error']}")
            return
        job.token = envelope["data"]["token"]
        job.expires = self.at(envelope["data"]["expiresAt"]) or 0.0
        self._plan_renew(job)

    def _on_agent(self, job: _AgentJob) -> None:
        if job.done or self.now < job.action_at:
            return
        work = job.work
        if job.plan == "crash":
            # the agent dies: it stops renewing, the lease runs out and the step is ready again
            self._end(job.worker, work, "crashed")
            job.done = True
            self.schedule(max(job.expires, self.now), "wake", work.run_id)
            return
        if job.plan == "escalate":
            envelope = self.call(job.worker.id, "escalate", {"token": job.token, "note": "Simulated: not sure, "
                                                             "a person should look."})
            self._finish_agent(job, envelope, "escalated")
            return
        step = self.process.step(work.step_id)
        args = self._submission(job, step)
        if job.invalid:
            job.invalid = False
            args = self._spoil(args, step)
            envelope = self.call(job.worker.id, "submit", args)
            if not envelope["ok"] and envelope["error"]["code"] == "not_accepted":
                work.rework.append("not_accepted")
                fix = self.behaviour.dist(work.step_id, "fix")
                rng = self.rng(f"step:{work.step_id}", work.run_id)
                seconds = fix.sample(rng, self.ctx(work.run_id, rng, step_id=work.step_id)) if fix else 0.0
                self._act_at(job, self.now + (seconds or 0.0))
                return
            self._finish_agent(job, envelope, "submitted")
            return
        envelope = self.call(job.worker.id, "submit", args)
        self._finish_agent(job, envelope, "submitted")

    def _finish_agent(self, job: _AgentJob, envelope: dict[str, Any], result: str) -> None:
        job.done = True
        work = job.work
        if envelope["ok"]:
            if result == "submitted":
                st = self.engine.run_state(work.run_id).steps[work.step_id]
                if st.state == "ready":
                    result = "check_failed"
                elif st.state == "waiting":
                    result = "check_unsure"
        else:
            error = envelope["error"]
            result = error["code"] if not error.get("issues") else f"{error['code']}:{error['issues'][0]}"
            if error["code"] not in ("conflict", "stale"):
                self.problem(f"{work.step_id} by {job.worker.id} refused: {error}")
        self._end(job.worker, work, result)
        self.observe(work.run_id)

    def _submission(self, job: _AgentJob, step: Any) -> dict[str, Any]:
        work = job.work
        rng = self.rng(f"step:{work.step_id}", work.run_id)
        ctx = self.ctx(work.run_id, rng, step_id=work.step_id, attempt=work.attempt, actor=job.worker.id,
                       route=job.route)
        output = generate(self.behaviour.step(work.step_id).output, step.output_specs, ctx)
        output.update(job.overrides)
        args: dict[str, Any] = {"token": job.token, "output": output,
                                "summary": f"Simulated {work.step_id}, attempt {work.attempt}."}
        evidence = self._evidence(job.worker.id, work, step, upload=True)
        if evidence:
            args["evidence"] = evidence
        if step.routes:
            args["next"] = job.route
            args["reason"] = f"Simulated choice: {job.route}."
        return args

    def _evidence(self, caller: str, work: Work, step: Any, *, upload: bool) -> list[dict[str, str]] | None:
        items: list[dict[str, str]] = []
        for kind in step.evidence:
            if kind == "link":
                items.append({"kind": "link", "ref": f"https://evidence.sim.example/{work.run_id}/{work.step_id}"})
            elif upload:
                content = f"simulated evidence: {work.run_id} {work.step_id} attempt {work.attempt}".encode()
                envelope = self.call(caller, "upload", {"fileName": f"{work.step_id}.txt",
                                                        "contentType": "text/plain",
                                                        "contentBase64": base64.b64encode(content).decode()})
                if envelope["ok"]:
                    items.append({"kind": "file", "ref": envelope["data"]["id"]})
            else:  # a person cannot upload: cite a file already in the run's data
                ref = self._run_file(work.run_id)
                if ref is None:
                    return None
                items.append({"kind": "file", "ref": ref})
        return items

    def _run_file(self, run_id: str) -> str | None:
        def walk(entry: Any) -> str | None:
            for item in (entry or {}).get("evidence") or []:
                if item.get("kind") == "file":
                    return item["ref"]
            for old in (entry or {}).get("history") or []:
                found = walk(old)
                if found:
                    return found
            return None
        for entry in self.engine.run_state(run_id).data_steps.values():
            found = walk(entry)
            if found:
                return found
        return None

    @staticmethod
    def _spoil(args: dict[str, Any], step: Any) -> dict[str, Any]:
        """A submission the output check refuses: a required field left out (else an undeclared one)."""
        output = dict(args["output"])
        required = [name for name, spec in step.output_specs.items() if not spec.optional and name in output]
        if required:
            output.pop(required[0])
        else:
            output["unexpected"] = "simulated mistake"
        return {**args, "output": output}

    def _on_wake(self, run_id: str) -> None:
        self.observe(run_id)

    # -- people ----------------------------------------------------------------------------------------
    def _poll_person(self, worker: Worker) -> None:
        def take(entry: dict[str, Any]) -> bool:
            if not self._ours(worker, entry):
                return False
            self._pick(worker, entry["runId"], entry["workItem"])
            return True

        self._poll(worker, len(self._taken) + worker.free, take)

    def _pick(self, worker: Worker, run_id: str, item: dict[str, Any]) -> None:
        run = self.engine.run_state(run_id)
        held = run.item(item["id"])
        step_id = item["stepId"]
        kind = "escalation" if item["escalation"] is not None else item["kind"]
        assigned = item["assignedTo"]
        resource = assigned.get("group") or str(assigned.get("person"))
        attempt = run.steps[step_id].attempt
        ready = self.at(held.created_at) if held is not None else self.now
        work = Work(run_id, step_id, kind, resource, worker.id, attempt, ready or 0.0, self.now, self.at(item["due"]))
        self.log.append(work)
        self._taken.add(item["id"])
        self._take(worker)
        rng = self.rng(f"step:{step_id}" if kind != "escalation" else f"escalation:{step_id}", run_id)
        ctx = self.ctx(run_id, rng, step_id=step_id, attempt=attempt, actor=worker.id)
        step = self.process.step(step_id)
        if kind == "escalation":
            esc = self.behaviour.escalation_for(step_id)
            decision = esc.decisions.choose(rng, ctx)
            response = esc.response
        else:
            decision = self.behaviour.decisions(step_id, kind).choose(rng, ctx)
            response = self.behaviour.dist(step_id, "response")
        route = None
        if decision == "completed" and step.routes:
            mix = self.behaviour.step(step_id).routes
            route = mix.choose(rng, ctx) if mix is not None else step.routes[0].to
        seconds = response.sample(rng, ctx) if response is not None else 0.0
        job = _PersonJob(worker, work, item["id"], item["snapshot"], decision, route)
        self.schedule(self.now + (seconds or 0.0), "decide", job)

    def _on_decide(self, job: _PersonJob) -> None:
        work = job.work
        args = self._decision(job)
        envelope = self.call(job.worker.id, "decide", args)
        if not envelope["ok"] and envelope["error"]["code"] == "stale":
            # the run changed while the person looked: read it again and decide on what is there now
            work.rework.append("stale_snapshot")
            view = self.call(job.worker.id, "get_run", {"runId": work.run_id})
            fresh = next((w for w in view["data"]["workItems"] if w["id"] == job.item_id), None) if view["ok"] else None
            if fresh is not None:
                envelope = self.call(job.worker.id, "decide", {**args, "snapshot": fresh["snapshot"]})
        self._taken.discard(job.item_id)
        if envelope["ok"]:
            result = args["decision"]
        else:
            error = envelope["error"]
            result = error["code"] if not error.get("issues") else f"{error['code']}:{error['issues'][0]}"
            if error["code"] not in ("conflict", "stale", "not_found"):
                self.problem(f"decide on {work.step_id} by {job.worker.id} refused: {error}")
                self._mark_assigned({"group": work.resource} if work.resource.startswith("g_")
                                    else {"person": work.resource})
        self._end(job.worker, work, result)
        self.observe(work.run_id)

    def _decision(self, job: _PersonJob) -> dict[str, Any]:
        work = job.work
        args: dict[str, Any] = {"runId": work.run_id, "workItemId": job.item_id, "snapshot": job.snapshot,
                                "decision": job.decision}
        if job.decision in NOTE_REQUIRED:
            args["note"] = f"Simulated: {job.decision}."
            return args
        if job.decision != "completed":
            return args
        # `completed` is offered on tasks and escalations (of agent steps) only
        step = cast(AgentStep | TaskStep, self.process.step(work.step_id))
        run = self.engine.run_state(work.run_id)
        held = run.item(job.item_id)
        if work.kind == "escalation" and held is not None and (held.escalation or {}).get("candidate") is not None:
            return args  # complete with the held submission
        rng = self.rng(f"step:{work.step_id}", work.run_id)
        ctx = self.ctx(work.run_id, rng, step_id=work.step_id, attempt=work.attempt, actor=job.worker.id,
                       route=job.route)
        args["output"] = generate(self.behaviour.step(work.step_id).output, step.output_specs, ctx)
        evidence = self._evidence(job.worker.id, work, step, upload=False)
        if evidence is None:  # file evidence a person cannot give: send it back instead
            fallback = "returned" if work.kind == "escalation" else "failed"
            self.problem(f"{work.step_id}: a person cannot give file evidence; decided {fallback}")
            return {**{k: v for k, v in args.items() if k != "output"}, "decision": fallback,
                    "note": "Simulated: the evidence needs an upload."}
        if evidence:
            args["evidence"] = evidence
        args["summary"] = f"Simulated {work.step_id} by {job.worker.id}."
        if step.routes:
            args["next"] = job.route
            args["reason"] = f"Simulated choice: {job.route}."
        return args

    # -- events ----------------------------------------------------------------------------------------
    def _await_event(self, run_id: str, step_id: str, ready_since: str | None, due: str | None, attempt: int) -> None:
        step = cast(WaitForStep, self.process.step(step_id))  # the engine waits on wait_for steps only
        ready = self.at(ready_since) if ready_since else self.now
        work = Work(run_id, step_id, "wait_for", f"event:{step.event}", None, attempt,
                    ready or self.now, ready or self.now, self.at(due))
        self.log.append(work)
        arrival = self.behaviour.dist(step_id, "arrival")
        rng = self.rng(f"step:{step_id}", run_id)
        seconds = arrival.sample(rng, self.ctx(run_id, rng, step_id=step_id)) if arrival is not None else None
        if seconds is None:
            work.result = "never"
            return
        self.schedule(self.now + seconds, "event", work)

    def _on_event(self, work: Work) -> None:
        step = cast(WaitForStep, self.process.step(work.step_id))
        st = self.engine.run_state(work.run_id).steps[work.step_id]
        work.ended_at = self.now
        if st.state != "waiting" or self.at(st.ready_since) != work.ready_at:
            work.result = "not_waiting"
            return
        rng = self.rng(f"step:{work.step_id}", work.run_id)
        data = {name: gen.make(self.ctx(work.run_id, rng, step_id=work.step_id))
                for name, gen in self.behaviour.step(work.step_id).data.items()}
        args: dict[str, Any] = {"runId": work.run_id, "name": step.event}
        if data:
            args["data"] = data
        envelope = self.call(self.event_sender, "send_event", args)
        work.result = "consumed" if envelope["ok"] and envelope["data"]["consumedBy"] else (
            "held" if envelope["ok"] else envelope["error"]["code"])
        self.observe(work.run_id)

    # -- busy / free -----------------------------------------------------------------------------------
    def _take(self, worker: Worker) -> None:
        worker.busy += 1

    def _end(self, worker: Worker, work: Work, result: str) -> None:
        work.ended_at = self.now
        work.result = result
        worker.busy -= 1
        worker.busy_seconds += self.now - work.started_at
        worker.free_since = self.now
        if worker.backlog:
            self._dirty.add(worker.id)


# -- the public entry point -------------------------------------------------------------------------------
def simulate(process: str | Path | Process, n: int = 100, behaviour: Any = None,
             capacity: Mapping[str, int] | None = None, seed: int = 0, start: str | None = None,
             directory: Any = None, db: str | Path = ":memory:", *, lease_seconds: int | None = None,
             until: str | float | None = None, validate: bool = False,
             progress: bool | None = None) -> Any:
    """Drive `n` runs of `process` through Engine.call on a virtual clock; returns a SimulationResult.

    process: a path, a process name among processes/, or YAML text. behaviour: a YAML file, YAML text or a dict
    (docs/simulation.md). capacity: {agent_id: concurrent claims, group_id: people at work}. seed: the same seed
    gives the same result, ids included. directory: a directory file/dict; None synthesizes one. db: ":memory:"
    or a DuckDB file of its own. until: stop the clock there (a duration after start, e.g. "30d", or hours).
    progress: a tqdm progress bar of arrivals (default: shown from PROGRESS_MIN_RUNS runs on).
    """
    params = {"process": process, "n": n, "behaviour": behaviour, "capacity": capacity, "seed": seed,
              "start": start, "directory": directory, "db": db, "lease_seconds": lease_seconds, "until": until,
              "validate": validate}
    label, text = resolve_process(process)
    loaded = load_text(text, label)
    definition = loaded.raise_for_errors()
    plan = Behaviour.load(behaviour).check(definition)
    cap = {**plan.capacity, **dict(capacity or {})}
    folder = directory if directory is not None else synthesize_directory(definition, cap)
    moment = start or plan.start or DEFAULT_START
    lease = lease_seconds or plan.lease_seconds or 600
    engine = open_engine(Directory.load(folder), db, moment, lease, seed)
    engine.publish(label, text=text)
    horizon = None
    if until is not None:
        from .behaviour import duration_seconds

        horizon = duration_seconds(until, "h")
    sim = Simulator(engine, definition.name, n=n, behaviour=plan, capacity=cap, seed=seed, until=horizon,
                    validate=validate, progress=progress)
    result = sim.run()
    result.params = params
    return result


__all__ = ["Simulator", "Work", "Worker", "parse_gen", "resolve_process", "simulate", "synthesize_directory"]
