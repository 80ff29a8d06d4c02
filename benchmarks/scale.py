"""History at scale: a DuckDB store holding N completed runs (default 1,000,000), reopened and used.

How the store is built: a few hundred real supplier-onboarding runs go through `Engine.call` (start_run,
get_work, claim, upload, submit, get_work, decide), on a virtual clock, with ids that carry a copy number
(`r_0000000000…`); then a BULK GENERATOR writes the store's own rows directly, in DuckDB, as copies of those
rows with new ids, new run numbers, new event and call-log numbers and times shifted by whole minutes:
`runs` (with their counts of claims and rewinds), `steps`, `events`, `requests` (and their `request_keys`),
`tool_calls`, `file_blobs`. Generating through `Engine.call` would take hours at this size; the copies have
the engine's real shape (the same documents, events, replay records and call-log rows) and one known difference: the lease tokens inside copied claim answers are those
of the template runs. The history spans `--days` (default 30): the replay records of the last 7 days
(the default window) are the ones a reopen keeps.

Then, each in a fresh process (so memory is the reopened engine's alone):
- reopen time: the first `Engine.open` after generation (it prunes the replay records past the window once:
  forgets them, their rows deleted by the store's thread after `open` returns, before any read; the first
  read's wait is printed) and a second one (steady state);
- RSS after reopen and 2,000 calls;
- get_work p50/p99 with 20 live runs, against the same 20 live runs on an empty store;
- get_run of an ended run, list_runs' first page (an operator), a replay of a request inside the window;
- `SELECT process, count(*), avg(cycle_seconds) FROM v_runs GROUP BY ALL`;
- a write's cost against that history: the durable engine loop (benchmarks/engine_loop.py, `--writes` runs of
  7 calls) on the store, then on an empty one: calls/s, CPU per call and per materialisation (`--writes-only`
  measures only this, e.g. on a kept store: `--db /tmp/s.duckdb --reuse --writes-only`).

    python benchmarks/scale.py --runs 50000        # the quick form, well under a minute of generation
    python benchmarks/scale.py                     # 1,000,000 runs (several minutes to generate)
    python benchmarks/scale.py --db /tmp/s.duckdb --keep   # keep the generated store to measure again
    python benchmarks/scale.py --db /tmp/s.duckdb --reuse  # measure a kept store without generating
    python benchmarks/scale.py --runs 50000 --writes 300 --writes-only  # the short form of the write row
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROCESS = ROOT / "processes" / "supplier-onboarding.yaml"
DIRECTORY = ROOT / "processes" / "directory.yaml"
START = datetime.fromisoformat("2026-01-01T00:00:00+00:00")
TEMPLATE = "0000000000"  # the copy number's place in every generated id: `_` + 10 hex digits
REPORT = base64.b64encode(b"%PDF-1.7 sanctions search report: no hits.").decode()
LIVE = 20
CALLS = 2000
GROUP_BY = "SELECT process, count(*), avg(cycle_seconds) FROM v_runs GROUP BY ALL"


def _ids() -> Callable[[str], str]:
    count = iter(range(1, 1 << 24))
    return lambda prefix: f"{prefix}_{TEMPLATE}{next(count):06x}"


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# -- building the store ---------------------------------------------------------------------------------
def template(db: str, runs: int) -> None:
    """`runs` real runs through the engine, all inside the clock's first minute, ids ready to be copied."""
    from studio import Engine, VirtualClock

    clock = VirtualClock(START)
    engine = Engine.open(processes=[PROCESS], directory=DIRECTORY, db=db, clock=clock, ids=_ids(), strict=True)
    rid = iter(range(1, 1 << 24))

    def call(caller: str, tool: str, args: dict[str, Any]) -> Any:
        if tool not in ("get_work", "get_run"):
            args = {**args, "requestId": f"q_{TEMPLATE}{next(rid):06x}"}
        envelope = engine.call(caller, tool, args)
        if not envelope["ok"]:
            raise SystemExit(f"{tool} failed: {envelope['error']}")
        return envelope["data"]

    step = 59.0 / runs
    for n in range(runs):
        run_id = call("u_mira", "start_run", {"process": "supplier-onboarding",
                                              "inputs": {"vendorName": f"Vendor {n}", "amount": 1000 + n}})["run"]["id"]
        call("a_screener", "get_work", {"limit": 1})
        token = call("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]
        file_id = call("a_screener", "upload", {"fileName": f"report-{n}.pdf", "contentType": "application/pdf",
                                                "contentBase64": REPORT})["id"]
        call("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "No matches."},
                                      "evidence": [{"kind": "file", "ref": file_id}],
                                      "summary": "Searched both lists; no hits.", "next": "approve",
                                      "reason": "Vendor is cleared."})
        item = call("u_omar", "get_work", {"limit": 1})["items"][0]["workItem"]
        done = call("u_omar", "decide", {**item["decide"]["arguments"], "decision": "approved"})
        assert done["run"]["state"] == "done"
        clock.advance(step)
    engine.close()


def replicate(db: str, copies: int, minutes: int) -> None:
    """Copies 1..copies-1 of the template's rows, written in bulk by DuckDB (copy 0 is the template)."""
    import duckdb

    from studio.store.retention import KEY_DIGEST_SQL

    conn = duckdb.connect(db)
    (runs,) = conn.execute("SELECT count(*) FROM runs").fetchone()  # type: ignore[misc]
    (events,) = conn.execute("SELECT max(seq) FROM events").fetchone()  # type: ignore[misc]
    (calls,) = conn.execute("SELECT max(seq) FROM tool_calls").fetchone()  # type: ignore[misc]
    day = START.strftime("%Y-%m-%dT%H:%M:")
    due = (START + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:")
    conn.execute(f"""CREATE TEMP TABLE copies AS SELECT c,
        '_' || printf('%010x', c) AS tag,
        INTERVAL (c * {minutes}) MINUTE AS shift,
        strftime(TIMESTAMP '{START:%Y-%m-%d %H:%M:%S}' + INTERVAL (c * {minutes}) MINUTE, '%Y-%m-%dT%H:%M:') AS day,
        strftime(TIMESTAMP '{START:%Y-%m-%d %H:%M:%S}' + INTERVAL (c * {minutes}) MINUTE + INTERVAL 2 DAY,
                 '%Y-%m-%dT%H:%M:') AS due
        FROM range(1, {copies}) t(c)""")

    def text(column: str) -> str:  # ids and times inside a text (a document, a payload, an answer)
        return (f"replace(replace(replace(replace({column}, '_{TEMPLATE}', k.tag), '{due}', '\\x01'), "
                f"'{day}', k.day), '\\x01', k.due)")

    def ident(column: str) -> str:
        return f"replace({column}, '_{TEMPLATE}', k.tag)"

    number = "CAST(json_extract(t.doc, '$.number') AS BIGINT)"
    statements = {
        "runs": f"""INSERT INTO runs SELECT {ident('t.id')}, t.process, t.version, t.mode, t.state, t.outcome,
            t.started_by, t.started_at + k.shift, t.updated_at + k.shift, t.ended_at + k.shift, t.ended_by,
            t.ended_note, t.inputs, t.revision,
            replace({text('t.doc')}, '"number":' || {number} || '}}', '"number":' || ({number} + k.c * {runs}) || '}}'),
            t.claims, t.rewinds, t.materialised_seq FROM template_runs t, batch k ORDER BY k.c, t.rowid""",
        # every run document each write committed (what a fork starts from): most of a real store's bytes
        "run_revisions": f"""INSERT INTO run_revisions SELECT {ident('t.run_id')}, t.revision,
            t.first_seq + k.c * {events}, t.last_seq + k.c * {events},
            replace({text('t.doc')}, '"number":' || {number} || '}}', '"number":' || ({number} + k.c * {runs}) || '}}')
            FROM template_run_revisions t, batch k ORDER BY k.c, t.rowid""",
        "steps": f"""INSERT INTO steps SELECT {ident('t.run_id')}, t.step_id, t.kind, t.position, t.state,
            t.ready_since + k.shift, t.due + k.shift, t.attempt, t.claimed_by, t.lease_expires_at + k.shift,
            t.updated_at + k.shift, t.materialised_seq FROM template_steps t, batch k ORDER BY k.c, t.rowid""",
        "events": f"""INSERT INTO events SELECT t.seq + k.c * {events}, t.occurred_at + k.shift,
            {ident('t.run_id')}, t.step_id, t.type, t.actor, {text('CAST(t.payload AS VARCHAR)')}
            FROM template_events t, batch k ORDER BY k.c, t.rowid""",
        "requests": f"""INSERT INTO requests SELECT t.caller, {ident('t.request_id')}, t.tool, t.args_sha256,
            {text('t.result')}, t.stored_at + k.shift FROM template_requests t, batch k ORDER BY k.c, t.rowid""",
        # the copies' key digests, as the store writes them with each record (the template's are written)
        "request_keys": f"""INSERT INTO request_keys SELECT {KEY_DIGEST_SQL}, stored_at FROM requests
            WHERE stored_at >= TIMESTAMPTZ '{START + timedelta(minutes=1):%Y-%m-%d %H:%M:%S}+00'""",
        "tool_calls": f"""INSERT INTO tool_calls SELECT t.seq + k.c * {calls}, t.called_at + k.shift, t.tool,
            t.caller, t.ok, t.code, t.issues, t.latency_ms, {ident('t.request_id')}, {ident('t.run_id')},
            t.step_id, t.attempt, t.decision, t.replay FROM template_tool_calls t, batch k ORDER BY k.c, t.rowid""",
        "file_blobs": f"""INSERT INTO file_blobs SELECT {ident('t.id')}, t.content FROM template_file_blobs t, batch k
            ORDER BY k.c, t.rowid""",
    }
    # In time order, as the engine appends: copy after copy, each in its template's order (a copy is later than the
    # one before, whole). A prune then deletes a prefix of each table, as on a real store; the generator's first
    # form inserted in parallel, in no order, and a reopen's prune of the interleaved rows made DuckDB's checkpoint
    # rewrite most row groups of `requests` (4-6 s; docs/performance.md, "Seventeenth pass"). Copies go in batches,
    # so a sort holds a batch's rows, not a table's.
    step = max(1, -(-copies // 16))
    batched = {table for table, statement in statements.items() if "batch k" in statement}  # copied from template_*
    for table in batched:
        conn.execute(f"CREATE TEMP TABLE template_{table} AS SELECT * FROM {table}")  # copy 0 alone, in order
    for table, statement in statements.items():
        started = time.perf_counter()
        for low in range(1, copies, step) if table in batched else [None]:
            if low is not None:
                conn.execute(f"CREATE OR REPLACE TEMP TABLE batch AS SELECT * FROM copies WHERE c >= {low} "
                             f"AND c < {low + step}")
            conn.execute(statement)
        print(f"  {table}: {conn.execute(f'SELECT count(*) FROM {table}').fetchone()[0]:,} rows "  # type: ignore[index]
              f"({time.perf_counter() - started:.1f} s)", flush=True)
    conn.execute("CHECKPOINT")
    conn.close()


def build(db: str, runs: int, template_runs: int, days: float) -> datetime:
    """The store; returns the time its history ends (the clock a reopen uses)."""
    copies = max(1, -(-runs // template_runs))
    minutes = max(1, int(days * 1440 / copies))
    started = time.perf_counter()
    template(db, template_runs)
    print(f"  template: {template_runs} runs through Engine.call ({time.perf_counter() - started:.1f} s)", flush=True)
    if copies > 1:
        replicate(db, copies, minutes)
    return START + timedelta(minutes=copies * minutes)


# -- measuring (in a fresh process) ---------------------------------------------------------------------
def writes(db: str, now: str, runs: int) -> dict[str, Any]:
    """The durable engine loop on `db` from the clock `now`: calls/s, CPU per call, and per materialisation
    (`Store._materialise`, timed where it runs: the store's own thread) its wall time, that thread's CPU and
    the process's meanwhile (DuckDB's worker threads too, and the caller's, which goes on at the same time)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import engine_loop

    from studio.store.store import Store

    real = Store._materialise
    taken: list[tuple[float, float, float]] = []

    def timed(self: Store, *args: Any, **kwargs: Any) -> None:
        wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
        try:
            real(self, *args, **kwargs)
        finally:
            taken.append((time.perf_counter() - wall, time.thread_time() - thread, time.process_time() - process))

    from studio import Engine, VirtualClock

    engine = Engine.open(processes=[PROCESS], directory=DIRECTORY, db=db, clock=VirtualClock(now))
    _cancel_live(engine)  # the loop's get_work finds its own run's item first
    engine.close()
    Store._materialise = timed  # type: ignore[method-assign]
    try:
        result = engine_loop.run(runs, db, start=now)
    finally:
        Store._materialise = real  # type: ignore[method-assign]
    return {"calls_per_s": result["calls_per_s"], "cpu_us_per_call": result["cpu_us_per_call"],
            "materialisations": len(taken),
            **{f"{name}_ms": statistics.median(t[n] for t in taken) * 1000
               for n, name in enumerate(("wall", "thread_cpu", "process_cpu"))}}


def measure_writes(db: str, now: str, runs: int) -> dict[str, Any]:
    out = {"writes": writes(db, now, runs)}
    with tempfile.TemporaryDirectory() as tmp:
        out["writes_empty"] = writes(str(Path(tmp) / "empty.duckdb"), now, runs)
    return out


def measure(db: str, now: str, write_runs: int) -> dict[str, Any]:
    import psutil

    from studio import Engine, VirtualClock

    process = psutil.Process()
    out: dict[str, Any] = {}

    def opened(path: str) -> tuple[Engine, float]:
        started = time.perf_counter()
        engine = Engine.open(processes=[PROCESS], directory=DIRECTORY, db=path, clock=VirtualClock(now))
        return engine, time.perf_counter() - started

    engine, out["first_open_s"] = opened(db)
    started = time.perf_counter()  # the prune's deletion runs in the background; a read waits for it
    out["pruned_requests"] = engine.sql("SELECT count(*) AS n FROM requests")["n"][0]
    out["first_read_s"] = time.perf_counter() - started
    engine.close()
    engine, out["open_s"] = opened(db)
    out["rss_open_mb"] = process.memory_info().rss / 2**20
    out["live_in_memory"] = len(engine.active_runs())
    out["runs"] = int(engine.sql("SELECT count(*) AS n FROM runs")["n"][0])
    ended = [r for (r,) in engine.store.fetchall("SELECT id FROM runs USING SAMPLE 200 ROWS")]
    old = engine.store.fetchall("SELECT caller, request_id FROM requests USING SAMPLE 50 ROWS")
    out["get_work"] = _get_work(engine)
    out["get_run_ended"] = _timed(lambda i: engine.call("u_ops", "get_run", {"runId": ended[i % len(ended)]}), 200)
    out["list_runs"] = _timed(lambda i: engine.call("u_ops", "list_runs", {"limit": 100}), 20)
    out["replay_lookup"] = _timed(lambda i: engine.store.request(*old[i % len(old)]), 50)
    started = time.perf_counter()
    engine.sql(GROUP_BY)
    out["group_by_s"] = time.perf_counter() - started
    started = time.perf_counter()
    engine.sql(GROUP_BY)
    out["group_by_again_s"] = time.perf_counter() - started
    out["rss_after_mb"] = process.memory_info().rss / 2**20
    engine.close()

    with tempfile.TemporaryDirectory() as tmp:  # the same live work on an empty store
        empty, _ = opened(str(Path(tmp) / "empty.duckdb"))
        out["get_work_empty"] = _get_work(empty)
        empty.close()
    if write_runs:
        out.update(measure_writes(db, now, write_runs))
    return out


def _timed(fn: Callable[[int], Any], n: int) -> dict[str, float]:
    times = []
    for i in range(n):
        started = time.perf_counter()
        result = fn(i)
        times.append((time.perf_counter() - started) * 1000)
        if isinstance(result, dict) and not result.get("ok", True):
            raise SystemExit(f"failed: {result}")
    return {"p50_ms": statistics.median(times), "p99_ms": _quantile(times, 0.99)}


def _cancel_live(engine: Any) -> None:
    for run in engine.active_runs():
        cancelled = engine.call("u_ops", "cancel", {"runId": run.id, "reason": "an earlier measurement's",
                                                    "requestId": str(uuid.uuid4())})
        assert cancelled["ok"], cancelled


def _get_work(engine: Any) -> dict[str, float]:
    """LIVE runs started (the live runs an earlier measurement of a kept store left are cancelled first, so
    both stores hold the same live work), then CALLS get_work calls, an agent's and a person's."""
    _cancel_live(engine)
    for n in range(LIVE):
        view = engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": str(uuid.uuid4()),
                                                   "inputs": {"vendorName": f"Live {n}", "amount": n}})
        assert view["ok"], view
    callers = ["a_screener", "u_omar"]
    return _timed(lambda i: engine.call(callers[i % 2], "get_work", {"limit": 20}), CALLS)


# -- the command --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000, help="completed runs in the store (default 1,000,000)")
    parser.add_argument("--template", type=int, default=250, help="runs made through Engine.call and copied")
    parser.add_argument("--days", type=float, default=30.0, help="how long a history the runs span (default 30)")
    parser.add_argument("--db", help="where the store goes (default: a temp dir, deleted after)")
    parser.add_argument("--keep", action="store_true", help="keep the store (with --db)")
    parser.add_argument("--reuse", action="store_true", help="measure an existing --db without generating")
    parser.add_argument("--writes", type=int, default=1000,
                        help="runs of the durable engine loop against the history and an empty store (0: none)")
    parser.add_argument("--writes-only", action="store_true", help="measure only that")
    parser.add_argument("--measure", metavar="NOW", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args(argv)
    if args.measure:
        found = (measure_writes(args.db, args.measure, args.writes) if args.writes_only
                 else measure(args.db, args.measure, args.writes))
        print(json.dumps(found, default=float))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "scale.duckdb")
        marker = Path(db + ".scale.json")
        if args.reuse:
            end = datetime.fromisoformat(json.loads(marker.read_text())["end"])
        else:
            for stale in (Path(db), Path(db + ".wal"), marker):
                stale.unlink(missing_ok=True)
            print(f"building {args.runs:,} completed runs over {args.days:g} days in {db}", flush=True)
            started = time.perf_counter()
            end = build(db, args.runs, args.template, args.days)
            marker.write_text(json.dumps({"end": end.isoformat()}))
            print(f"  built in {time.perf_counter() - started:.1f} s, {os.path.getsize(db) / 2**30:.2f} GiB", flush=True)
        now = (end + timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
        child = subprocess.run([sys.executable, __file__, "--db", db, "--measure", now, "--writes", str(args.writes)]
                               + (["--writes-only"] if args.writes_only else []),
                               capture_output=True, text=True, check=False)
        if child.returncode != 0:
            print(child.stderr, file=sys.stderr)
            return 1
        r = json.loads(child.stdout.strip().splitlines()[-1])
        if args.db and not args.keep and not args.reuse:
            for path in (Path(db), Path(db + ".wal"), marker):
                path.unlink(missing_ok=True)
    if args.writes_only:
        _print_writes(r, args.writes)
        return 0
    print(f"{r['runs']:,} runs in the store, {r['live_in_memory']} live in memory; replay records kept "
          f"(7-day window): {int(r['pruned_requests']):,}")
    print(f"  reopen: first {r['first_open_s']:.2f} s (prunes records past the window: their deletion goes on in the "
          f"background, and the first read waited {r['first_read_s']:.2f} s for it), then {r['open_s']:.2f} s")
    print(f"  RSS after reopen {r['rss_open_mb']:.0f} MB, after {CALLS:,} get_work + reads {r['rss_after_mb']:.0f} MB")
    for name, label in (("get_work", f"get_work ({LIVE} live runs)"), ("get_work_empty", "  same, empty store"),
                        ("get_run_ended", "get_run, an ended run"), ("list_runs", "list_runs, first 100"),
                        ("replay_lookup", "replay record look-up")):
        print(f"  {label:<26} p50 {r[name]['p50_ms']:7.2f} ms  p99 {r[name]['p99_ms']:7.2f} ms")
    print(f"  {GROUP_BY}: {r['group_by_s']:.2f} s (again {r['group_by_again_s']:.2f} s)")
    _print_writes(r, args.writes)
    return 0


def _print_writes(r: dict[str, Any], runs: int) -> None:
    for name, label in (("writes", "on the history"), ("writes_empty", "same, empty store")):
        if name in r:
            w = r[name]
            print(f"  durable engine loop ({runs} runs), {label:<17} {w['calls_per_s']:6.0f} calls/s, CPU "
                  f"{w['cpu_us_per_call']:4.0f} µs per call; per materialisation (median of {w['materialisations']}): "
                  f"wall {w['wall_ms']:5.1f} ms, CPU of its thread {w['thread_cpu_ms']:5.1f} ms, of the process "
                  f"meanwhile {w['process_cpu_ms']:5.1f} ms")
    print(f"  (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    raise SystemExit(main())
