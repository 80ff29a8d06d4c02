"""Crash test: a process that writes is killed with SIGKILL at random moments, many times, on one database.

Two writers: the engine in a child process (forked from a warm "zygote" so a kill cycle costs milliseconds,
with one or several writing threads: the group-commit path), and `studio serve` over HTTP driven with the
MCP client. Each writer drives supplier-onboarding runs (start, claim, upload, a refused submit, a good
submit, decide) and records every answer it received (an acknowledged write). After the kills, a verifier
opens the database and checks: every acknowledged write replays to exactly its answer; it has its own
call-log row; every uploaded file is there; no run is in an impossible state (memory = tables, a lease iff
claimed, one `step_claimed` event per attempt, one `run_started` per run, ended iff it has an end); and, a
day later on the verifier's clock (every lease expired), a step whose last attempt was refused hands that
refusal's issues on (`handoff.issues`).

    python benchmarks/crash.py                      # 1,000 kills in process + 100 of the server
    python benchmarks/crash.py --kills 200 --server-kills 20 --threads 4
The suite runs the same (fewer kills) in tests/test_crash.py.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # server_kit: test helpers

from server_kit import ServerProcess, make_site  # noqa: E402

from studio import Engine, VirtualClock  # noqa: E402
from studio.clock import format_time  # noqa: E402

Call = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
Ack = Callable[[dict[str, Any]], None]
CONTENT = base64.b64encode(b"sanctions report: no hits").decode()


async def drive(call: Call, tag: str, ack: Ack, runs: int = 1_000_000) -> None:
    """Supplier-onboarding runs through `call`; every answer to a write goes to `ack` as it arrives."""

    async def write(caller: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        envelope = await call(caller, tool, args)
        ack({"caller": caller, "tool": tool, "args": args, "envelope": envelope})
        return envelope

    for n in range(runs):
        rid = f"{tag}-{n}"
        started = await write("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": f"{rid}-s",
                                                      "inputs": {"vendorName": f"V {rid}", "amount": n}})
        run_id = started["data"]["run"]["id"]
        token = (await write("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor",
                                                     "requestId": f"{rid}-c"}))["data"]["token"]
        file_id = (await write("a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                                        "contentBase64": CONTENT, "requestId": f"{rid}-u"}))["data"]["id"]
        if n % 2 == 0:  # refused: its call-log row is what a later expiry hands on (handoff.issues)
            await write("a_screener", "submit", {"token": token, "output": {"cleared": "yes"}, "summary": "x",
                                                 "requestId": f"{rid}-x"})
        await write("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "clear"},
                                             "evidence": [{"kind": "file", "ref": file_id}], "summary": "Checked.",
                                             "next": "approve", "reason": "Clear.", "requestId": f"{rid}-t"})
        view = await call("u_ops", "get_run", {"runId": run_id})
        item = view["data"]["workItems"][0]
        await write("u_omar", "decide", {**item["decide"]["arguments"], "decision": "approved",
                                         "requestId": f"{rid}-d"})


# -- the in-process writer: forked from a zygote ---------------------------------------------------------
def _exit_when_orphaned() -> None:
    """A writer whose zygote is gone (the test or benchmark that drove it was killed) stops, instead of
    writing on for ever under init."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def _child(db: str, processes: Path, directory: Path, tag: str, threads: int, acks: str) -> None:
    _exit_when_orphaned()
    engine = Engine.open(processes=processes, directory=directory, db=db)
    out = open(acks, "a", encoding="utf-8")  # noqa: SIM115 - open until the kill
    lock = threading.Lock()

    def ack(record: dict[str, Any]) -> None:
        line = json.dumps(record) + "\n"
        with lock:
            out.write(line)
            out.flush()

    async def call(caller: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        envelope = engine.call(caller, tool, args)
        if not envelope["ok"] and envelope["error"]["code"] != "not_accepted":
            print(f"writer: {tool} {args} -> {envelope}", file=sys.stderr, flush=True)
            os._exit(2)
        return envelope

    workers = [threading.Thread(target=lambda k=k: asyncio.run(drive(call, f"{tag}.{k}", ack)), daemon=True)
               for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def warm() -> None:
    """What every writer would do first, done once before the forks: imports and compiled validators (no
    database is opened here: a forked child must not inherit DuckDB's threads)."""
    from studio import contract
    from studio.engine.tools import HANDLERS

    for tool in HANDLERS:
        contract.argument_issues(tool, {})


def zygote(db: str, processes: str, directory: str) -> None:
    """Reads `<tag> <threads> <acks file>` lines; forks a writer for each and prints its pid."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # killed children are reaped by the kernel
    warm()
    for line in sys.stdin:
        tag, threads, acks = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                _child(db, Path(processes), Path(directory), tag, int(threads), acks)
            except BaseException:  # noqa: BLE001 - said, then the child ends as a child must
                import traceback

                traceback.print_exc()
            os._exit(1)
        print(pid, flush=True)


class Zygote:
    def __init__(self, db: Path, processes: Path, directory: Path):
        import subprocess

        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, __file__, "--zygote", str(db), str(processes), str(directory)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def fork(self, tag: str, threads: int, acks: Path) -> int:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"{tag} {threads} {acks}\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(30)


def read_acks(path: Path) -> list[dict[str, Any]]:
    """Complete lines only: a line cut by the kill was never an acknowledgement the writer saw through."""
    if not path.exists():
        return []
    acks = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        try:
            acks.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return acks


def wait_for_acks(path: Path, at_least: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= at_least:
            return
        time.sleep(0.005)


def kill_in_process(root: Path, kills: int, threads: int, seed: int, *, first: int = 0) -> list[dict[str, Any]]:
    """`kills` writers forked and SIGKILLed after a random number of acknowledged writes."""
    rng = random.Random(seed)
    processes, directory = root / "processes", root / "directory.yaml"
    acks_path = root / f"acks-{threads}.jsonl"
    zygote_ = Zygote(root / "crash.duckdb", processes, directory)
    try:
        for n in range(first, first + kills):
            before = acks_path.read_bytes().count(b"\n") if acks_path.exists() else 0
            pid = zygote_.fork(f"k{n}t{threads}", threads, acks_path)
            wait_for_acks(acks_path, before + rng.randint(0, 8), timeout=30)
            time.sleep(rng.random() * 0.004)  # anywhere, also between an fsync and its answer
            os.kill(pid, signal.SIGKILL)  # ProcessLookupError: the writer died by itself (its stderr says why)
            while True:  # gone (reaped: the zygote ignores SIGCHLD) before the next one opens the file
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.001)
    finally:
        zygote_.close()
    return read_acks(acks_path)


# -- the server writer -----------------------------------------------------------------------------------
def kill_server(root: Path, kills: int, seed: int, tokens: dict[str, str]) -> list[dict[str, Any]]:
    """`studio serve` on the same database, SIGKILLed while MCP clients write."""
    from studio.agent import connect

    rng = random.Random(seed)
    processes, directory = root / "processes", root / "directory.yaml"
    acked: list[dict[str, Any]] = []
    for n in range(kills):
        server = ServerProcess(processes, directory, root / "crash.duckdb", root / "server.log").start()

        async def main(server: ServerProcess = server, n: int = n) -> None:
            from contextlib import AsyncExitStack

            async with AsyncExitStack() as stack:
                clients = {who: await stack.enter_async_context(connect(server.url, tokens[who]))
                           for who in ("u_mira", "a_screener", "u_ops", "u_omar")}

                async def call(caller: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
                    return await clients[caller].call(tool, args)

                async def killer() -> None:
                    await asyncio.sleep(0.05 + rng.random() * 0.5)
                    server.kill()

                kill = asyncio.create_task(killer())
                with contextlib.suppress(BaseException):  # the kill ends the session: expected
                    await drive(call, f"s{n}", acked.append)
                await kill

        with contextlib.suppress(BaseException):  # the session's teardown after the kill
            asyncio.run(main())
        server.kill()
    return acked


# -- the verifier ----------------------------------------------------------------------------------------
def _normal(value: Any) -> Any:
    return json.loads(json.dumps(value))


def verify(root: Path, acks: list[dict[str, Any]]) -> dict[str, int]:
    """Every acknowledged write there exactly once, with its call-log row; no run in an impossible state;
    every refusal handed on when its lease expires (the verifier's clock is a day ahead: all have)."""
    later = format_time(datetime.now(UTC) + timedelta(days=1))
    engine = Engine.open(processes=root / "processes", directory=root / "directory.yaml",
                         db=str(root / "crash.duckdb"), clock=VirtualClock(later))
    try:
        logged = Counter((c, r, code) for c, r, code in engine.store.fetchall(
            "SELECT caller, request_id, coalesce(code, 'ok') FROM tool_calls WHERE NOT replay"))
        for ack in acks:
            envelope = ack["envelope"]
            code = "ok" if envelope["ok"] else envelope["error"]["code"]
            key = (ack["caller"], ack["args"]["requestId"], code)
            assert logged[key] == 1, f"call-log rows for {key}: {logged[key]}"
            replay = engine.call(ack["caller"], ack["tool"], ack["args"])
            assert _normal(replay) == _normal(envelope), (ack, replay)
            if ack["tool"] == "upload":
                stored = engine.file_content(envelope["data"]["id"])
                assert stored is not None and hashlib.sha256(stored[1]).hexdigest() == envelope["data"]["sha256"]
        runs = {r.id: r for r in engine.runs()}
        table = {rid: (state, revision) for rid, state, revision in engine.store.fetchall(
            "SELECT id, state, revision FROM runs")}
        assert table == {rid: (r.state, r.revision) for rid, r in runs.items()}, "memory and tables differ"
        claimed = Counter((r, s) for r, s in engine.store.fetchall(
            "SELECT run_id, step_id FROM events WHERE type = 'step_claimed'"))
        started = Counter(r for (r,) in engine.store.fetchall("SELECT run_id FROM events WHERE type = 'run_started'"))
        assert set(started) == set(runs) and set(started.values()) <= {1}, "run_started events and runs differ"
        for run in runs.values():
            assert run.is_ended == (run.ended is not None), run.id
            for step_id, st in run.steps.items():
                assert (st.state == "claimed") == (st.lease is not None), (run.id, step_id)
                if st.kind == "agent":
                    assert claimed[(run.id, step_id)] == st.attempt, (run.id, step_id, st.attempt)
        handed = 0
        for ack in acks:
            envelope = ack["envelope"]
            if ack["tool"] != "submit" or envelope["ok"] or envelope["error"]["code"] != "not_accepted":
                continue
            claims = engine.signer.verify(ack["args"]["token"])
            assert claims is not None
            st = runs[claims["r"]].steps[claims["s"]]
            if st.state == "ready" and st.attempt == claims["a"]:  # the lease expired after the refusal
                assert (st.handoff or {}).get("issues") == envelope["error"]["issues"], (claims, st.handoff)
                handed += 1
        seqs = [s for (s,) in engine.store.fetchall("SELECT seq FROM events")]
        assert len(seqs) == len(set(seqs)), "an event seq twice"
        return {"acknowledged": len(acks), "runs": len(runs), "done": sum(r.state == "done" for r in runs.values()),
                "handed_on": handed}
    finally:
        engine.close()


def campaign(root: Path, *, kills: int, threads: list[int], server_kills: int, seed: int = 1) -> dict[str, Any]:
    """The whole test on a fresh site under `root`; returns what was killed and verified."""
    _, _, tokens = make_site(root)
    acks: list[dict[str, Any]] = []
    per = kills // len(threads)
    started = time.monotonic()
    for k, count in enumerate(threads):
        acks += kill_in_process(root, per, count, seed + k, first=k * per)
    in_process = time.monotonic() - started
    if server_kills:
        acks += kill_server(root, server_kills, seed, tokens)
    result = verify(root, acks)
    return {**result, "kills": per * len(threads) + server_kills, "in_process_s": in_process,
            "total_s": time.monotonic() - started}


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--zygote":
        zygote(*sys.argv[2:5])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=1000, help="kills of the in-process writer")
    parser.add_argument("--server-kills", type=int, default=100)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4], help="writing threads, one pass each")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = campaign(Path(tmp), kills=args.kills, threads=args.threads, server_kills=args.server_kills,
                          seed=args.seed)
    print(f"{result['kills']} kills ({args.kills} in process with {args.threads} threads, "
          f"{args.server_kills} of studio serve) in {result['total_s']:.0f} s")
    print(f"  {result['acknowledged']} acknowledged writes: all there, replayed exactly, each with its call-log row")
    print(f"  {result['runs']} runs ({result['done']} done): none in an impossible state; "
          f"{result['handed_on']} refusals handed on after their lease expired")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
