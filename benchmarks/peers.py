"""The studio against SpiffWorkflow on the same approval flow, side by side: completed durable runs per second.

The flow (benchmarks/peers/approval.yaml and approval.bpmn): an agent task, then a person's approval, then
done. Both sides run it to the end many times, in one process, alternating round by round (which side goes
first alternates too), so both see the same machine load; the script prints each side's completed runs per
second per round, the totals and the ratio.

The same durability on both sides, every step on disk before the next begins:
  * studio: every call through `Engine.call` on a database file (a run is start_run, get_work, claim, submit,
    get_work, decide: 6 calls, 4 of them writes). Each accepted write is durable before its call returns, as
    the engine always does on a file (the store's journal, fsync'd on commit).
  * SpiffWorkflow 3.x: the BPMN process from the same flow; the workflow is serialized with its own
    `BpmnWorkflowSerializer` after each step (started, agent task done, approval done: 3 writes per run) and
    committed to SQLite in WAL mode with `synchronous=FULL` (fsync on every commit), a row per workflow.
    The workflow object stays in memory between steps (as the studio keeps live runs in memory): the most
    favourable way to run Spiff, no reload per step.
Neither side runs tools, agents or people: the calls a client would make, back to back, from one thread.
The studio side also checks each answer (`ok`, the run `done`); the Spiff side checks the workflow completed.

With `--clients N`, N threads run each side at once (a team server's callers), each its own runs:
  * studio: one engine shared by the N threads, so concurrent writes share an fsync (group commit). A
    client cannot take the first item of a shared inbox (another client's run may be its first), so a run
    is start_run, claim (by run and step), submit, get_run, decide: 5 calls, the same 4 writes.
  * SpiffWorkflow: each thread its own workflow objects; their writes go through one SQLite connection,
    one commit (one fsync) at a time under a lock. That is its most favourable form: with a connection
    per thread, SQLite's busy handler makes a waiting writer sleep (1 ms, then 2, 5, 10 …), and 4 clients
    completed 59 runs/s instead of ~500.

    pip install 'agentprocess-studio[bench]'   # SpiffWorkflow, the benchmark's only extra dependency
    python benchmarks/peers.py                 # 5 rounds of 400 runs each side
    python benchmarks/peers.py --quick         # 3 rounds of 40 runs: well under a minute
    python benchmarks/peers.py --clients 8     # 8 callers at once on each side
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studio import Engine, WallClock

HERE = Path(__file__).resolve().parent / "peers"
ROOT = Path(__file__).resolve().parent.parent
PROCESS = HERE / "approval.yaml"
BPMN = HERE / "approval.bpmn"
DIRECTORY = ROOT / "processes" / "directory.yaml"


def _rid() -> str:
    return str(uuid.uuid4())


class Studio:
    """The studio engine on a database file; `run()` takes one run from start to done through `Engine.call`."""

    name = "studio"

    def __init__(self, folder: Path):
        self.engine = Engine.open(processes=[PROCESS], directory=DIRECTORY, db=str(folder / "studio.duckdb"),
                                  clock=WallClock())
        self.n = 0

    def _call(self, caller: str, tool: str, args: dict[str, Any]) -> Any:
        envelope = self.engine.call(caller, tool, args)
        if not envelope["ok"]:
            raise SystemExit(f"studio {tool} failed: {envelope['error']}")
        return envelope["data"]

    def run(self, shared: bool = False) -> None:
        """One run to done; `shared`: other clients' runs are in the inboxes too (this run's items by id)."""
        self.n += 1
        view = self._call("u_mira", "start_run", {"process": "peer-approval", "requestId": _rid(),
                                                  "inputs": {"vendorName": f"Vendor {self.n}", "amount": 1000}})
        run_id = view["run"]["id"]
        if shared:
            claim = {"runId": run_id, "stepId": "check"}
        else:
            claim = self._call("a_screener", "get_work", {"limit": 1})["items"][0]["claim"]["arguments"]
        token = self._call("a_screener", "claim", {**claim, "requestId": _rid()})["token"]
        self._call("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "No hits."},
                                            "summary": "Checked.", "requestId": _rid()})
        if shared:
            item = self._call("u_omar", "get_run", {"runId": run_id})["workItems"][0]
        else:
            item = self._call("u_omar", "get_work", {"limit": 1})["items"][0]["workItem"]
        done = self._call("u_omar", "decide", {**item["decide"]["arguments"], "requestId": _rid(),
                                               "decision": "approved"})
        if done["run"]["state"] != "done" or done["run"]["id"] != run_id:
            raise SystemExit(f"studio run {run_id} did not end done")

    def close(self) -> None:
        self.engine.close()


class Spiff:
    """SpiffWorkflow on SQLite (WAL, synchronous=FULL): the workflow serialized and committed after each step."""

    name = "spiff"

    def __init__(self, folder: Path):
        from SpiffWorkflow.bpmn import BpmnWorkflow
        from SpiffWorkflow.bpmn.parser import BpmnParser
        from SpiffWorkflow.bpmn.serializer import BpmnWorkflowSerializer
        from SpiffWorkflow.util.task import TaskState

        parser = BpmnParser()
        parser.add_bpmn_file(str(BPMN))
        self.spec = parser.get_spec("approval")
        self.workflow_class = BpmnWorkflow
        self.ready = TaskState.READY
        self.serializer = BpmnWorkflowSerializer()
        self.db = sqlite3.connect(folder / "spiff.sqlite", isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE workflows (id TEXT PRIMARY KEY, completed INTEGER, state TEXT)")
        self.n = 0
        self.lock = threading.Lock()  # several clients: one commit at a time on the one connection

    def _save(self, workflow_id: str, workflow: Any) -> None:
        state = self.serializer.serialize_json(workflow)
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT OR REPLACE INTO workflows VALUES (?, ?, ?)",
                            (workflow_id, int(workflow.is_completed()), state))
            self.db.execute("COMMIT")

    def _step(self, workflow: Any, name: str, data: dict[str, Any]) -> None:
        task = workflow.get_next_task(state=self.ready, manual=True)
        if task is None or task.task_spec.name != name:
            raise SystemExit(f"spiff: expected the ready task {name}, got {task}")
        task.data.update(data)
        task.run()
        workflow.do_engine_steps()

    def run(self, shared: bool = False) -> None:
        with self.lock:
            self.n += 1
            n = self.n
        workflow_id = _rid()
        workflow = self.workflow_class(self.spec)
        workflow.data.update(vendorName=f"Vendor {n}", amount=1000)
        workflow.do_engine_steps()
        self._save(workflow_id, workflow)
        self._step(workflow, "check", {"cleared": True, "summary": "No hits."})
        self._save(workflow_id, workflow)
        self._step(workflow, "approve", {"decision": "approved"})
        self._save(workflow_id, workflow)
        if not workflow.is_completed():
            raise SystemExit(f"spiff workflow {workflow_id} did not complete")

    def close(self) -> None:
        (count,) = self.db.execute("SELECT count(*) FROM workflows WHERE completed = 1").fetchone()
        if count != self.n:
            raise SystemExit(f"spiff: {count} completed workflows stored, {self.n} run")
        self.db.close()


@dataclass
class Tally:
    rates: list[float] = field(default_factory=list)
    runs: int = 0
    seconds: float = 0.0
    cpu: float = 0.0  # this process's CPU time: what the side costs apart from waiting for the disk


def _round(side: Any, runs: int, tally: Tally, clients: int = 1) -> float:
    """`runs` runs of one side; with several clients, each thread runs its share at once."""
    started, cpu = time.perf_counter(), time.process_time()
    if clients == 1:
        for _ in range(runs):
            side.run()
    else:
        def client(count: int) -> None:
            for _ in range(count):
                side.run(shared=True)

        threads = [threading.Thread(target=client, args=(runs // clients,)) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        runs = runs // clients * clients
    seconds = time.perf_counter() - started
    tally.cpu += time.process_time() - cpu
    tally.rates.append(runs / seconds)
    tally.runs += runs
    tally.seconds += seconds
    return runs / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=400, help="runs per side per round")
    parser.add_argument("--warmup", type=int, default=20, help="runs per side before the first round")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 40 runs (well under a minute)")
    parser.add_argument("--clients", type=int, default=1, help="callers at once on each side (threads)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.runs, args.warmup = 3, 40, 5
    try:
        import SpiffWorkflow  # noqa: F401
    except ImportError:
        raise SystemExit("SpiffWorkflow is not installed: pip install 'agentprocess-studio[bench]'") from None
    from importlib.metadata import version

    with tempfile.TemporaryDirectory() as tmp:
        sides = [Studio(Path(tmp)), Spiff(Path(tmp))]
        tallies = {side.name: Tally() for side in sides}
        for side in sides:
            for _ in range(args.warmup):
                side.run()
        print(f"approval flow, durable on both sides; SpiffWorkflow {version('SpiffWorkflow')}, "
              f"{args.rounds} rounds of {args.runs} runs each side, {args.clients} client(s) at once")
        for n in range(args.rounds):
            order = sides if n % 2 == 0 else sides[::-1]
            rates = {side.name: _round(side, args.runs, tallies[side.name], args.clients) for side in order}
            print(f"  round {n + 1}: studio {rates['studio']:7.1f} runs/s   spiff {rates['spiff']:7.1f} runs/s   "
                  f"ratio {rates['studio'] / rates['spiff']:.2f}x")
        for side in sides:
            side.close()
    studio, spiff = tallies["studio"], tallies["spiff"]
    overall = {name: t.runs / t.seconds for name, t in tallies.items()}
    print(f"  overall: studio {overall['studio']:.1f} completed durable runs/s, spiff {overall['spiff']:.1f}; "
          f"ratio {overall['studio'] / overall['spiff']:.2f}x "
          f"(median of rounds {statistics.median(a / b for a, b in zip(studio.rates, spiff.rates, strict=True)):.2f}x)")
    print(f"  CPU per completed run: studio {studio.cpu / studio.runs * 1000:.2f} ms, "
          f"spiff {spiff.cpu / spiff.runs * 1000:.2f} ms (the rest of the wall time is waiting for fsync)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
