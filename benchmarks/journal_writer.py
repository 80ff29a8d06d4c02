"""The journal's group commit in this process against a writer process (docs/performance.md, "A writer
process for the journal"): journal only, no engine, the same rows, alternated round by round.

    python benchmarks/journal_writer.py                       # 3 rounds, 1 and 8 threads, 0 and 150 µs of CPU
    python benchmarks/journal_writer.py --rounds 5 --writes 4000 --threads 8 --burn 150
    python benchmarks/journal_writer.py --disk               # this disk's fdatasync alone, in parallel, kicked

Forms:

- `inproc`: studio/store/journal.py's `Journal` (leader/follower group commit, the commit made by one of the
  waiting Python threads, which needs the GIL after every statement and after the fsync);
- `child`: a writer process (benchmarks/journal_child.py: sqlite3 only, the same PRAGMAs and statements)
  reading write frames from one pipe; it commits everything that has arrived as one transaction and answers
  each write on its thread's own socket after COMMIT returned. A caller sleeps in `recv` (GIL released)
  until its answer: no Python thread is on the commit's path.

Each writing thread does, per write: `--burn` µs of Python CPU under one shared lock (the engine's lock, as
a tool call computes), then numbers and queues its record under that lock (as `Store.commit`), then waits
for it outside the lock (as `Engine.call`). Records are ~3 KB rows of the journal's shape (a run document,
two events, a call row, a replay record), a blob on every 25th. Prints writes/s, the latency of the wait
(p50/p99), process CPU per write (the child's included), voluntary context switches per write and, for
`inproc`, records per commit. Files in the system temp folder (the same disk as engine_loop.py's).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import journal_child  # noqa: E402 (this folder's script: the writer process)

from studio.store.journal import Journal, _rows_json
from studio.store.rows import BlobRow, CallRow, EventRow, Record, RequestRow

AT = "2026-12-01T22:00:00.000000Z"


def record(seq: int) -> Record:
    """A write of the engine loop's size: its journal row is ~3 KB."""
    run = f"r{seq:012d}"
    doc = json.dumps({"id": run, "process": "approval", "version": 1, "mode": "live", "state": "running",
                      "revision": 3, "started_by": "u_bench", "started_at": AT, "updated_at": AT,
                      "inputs": {"amount": 1200, "note": "n" * 800},
                      "steps": {f"s{i}": {"state": "done", "attempt": 1, "output": {"ok": True, "by": "u_bench",
                                                                                    "at": AT}}
                                for i in range(14)}}, separators=(",", ":"))
    events = [EventRow(seq * 2, AT, run, "check", "step_completed", "u_bench", '{"output":{"ok":true}}'),
              EventRow(seq * 2 + 1, AT, run, "approve", "step_ready", None, "{}")]
    request = RequestRow("u_bench", f"q-{seq}", "submit", "ab" * 32, json.dumps({"ok": True, "runId": run}), AT)
    call = CallRow(seq, AT, "submit", "u_bench", True, None, None, 0.31, f"q-{seq}", run, "check", 1, "accept",
                   False)
    blobs = [BlobRow(f"f{seq}", b"%PDF" * 200)] if seq % 25 == 0 else []
    return Record(seq, [doc], events, blobs=blobs, request=request, call=call, heads=[(run, 3)])


def burn(us: float) -> None:
    """About `us` µs of pure Python (the GIL held throughout)."""
    end = time.perf_counter() + us / 1e6
    x = 0
    while time.perf_counter() < end:
        for i in range(20):
            x += i


class ChildJournal:
    """The writer-process form, as small as it can be: `append` sends the frame (under the caller's lock,
    so frames arrive in seq order), `wait` reads this thread's answers."""

    def __init__(self, path: str):
        rfd, self.wfd = os.pipe()
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", journal_child.__file__, path, str(rfd), str(theirs.fileno())],
            pass_fds=(rfd, theirs.fileno()))
        os.close(rfd)
        theirs.close()
        self.local = threading.local()
        self.channels = 0
        self.lock = threading.Lock()
        self.commits = 0

    def _channel(self) -> socket.socket:
        sock = getattr(self.local, "sock", None)
        if sock is None:
            sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            with self.lock:
                self.channels += 1
                self.local.number = self.channels
                socket.send_fds(self.control, [journal_child.CHANNEL.pack(self.channels)], [theirs.fileno()])
            theirs.close()
            self.local.sock = sock
        return sock

    def append(self, r: Record) -> None:
        self._channel()
        texts = ["[" + ",".join(r.docs) + "]", _rows_json(r.events), _rows_json(r.processes),
                 _rows_json(r.refusals), _rows_json(r.request) if r.request else None,
                 _rows_json(r.call) if r.call else None]
        data = [t.encode("utf-8", "surrogatepass") if t is not None else None for t in texts]
        parts = [journal_child.TEXTS.pack(*[len(d) if d is not None else -1 for d in data], len(r.blobs))]
        parts += [d for d in data if d is not None]
        for b in r.blobs:
            bid = b.id.encode()
            parts += [journal_child.BLOB.pack(len(bid), len(b.content)), bid, b.content]
        payload = b"".join(parts)
        os.write(self.wfd, journal_child.HEADER.pack(87, self.local.number, r.seq, len(payload)) + payload)

    def wait(self, seq: int) -> None:
        sock = self.local.sock
        while True:
            data = sock.recv(journal_child.ANSWER.size, socket.MSG_WAITALL)
            if len(data) < journal_child.ANSWER.size:
                raise RuntimeError("the writer process died")
            got, status, _ = journal_child.ANSWER.unpack(data)
            if got == seq:
                if status:
                    raise RuntimeError(f"write {seq} lost")
                return

    def close(self) -> None:
        os.close(self.wfd)
        self.proc.wait(30)
        self.commits, self.committed = journal_child.STATS.unpack(self.control.recv(journal_child.STATS.size))
        self.control.close()

    def child_cpu(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


KICK = '''
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
while True:
    os.preadv(fd, [buf], 0)
'''


def kicker(folder: Path) -> subprocess.Popen[bytes]:
    """A process reading one 4 KB block with O_DIRECT in a loop: on this VM a lone fdatasync waits ~4 ms for
    its completion to be noticed, ~0.2 ms while another request is in flight (docs/performance.md)."""
    path = folder / "kick"
    path.write_bytes(b"k" * 65536)
    os.sync()
    return subprocess.Popen([sys.executable, "-I", "-S", "-c", KICK, str(path)])


def fdatasyncs(folder: Path, streams: int, each: int = 200) -> tuple[float, float]:
    """`streams` threads, each rewriting 4 KB of a file of its own then fdatasync, `each` times: (median
    latency ms of one fdatasync, fdatasyncs per second in all)."""
    latencies: list[float] = []
    lock = threading.Lock()

    def loop(n: int) -> None:
        fd = os.open(folder / f"sync{n}", os.O_WRONLY | os.O_CREAT)
        try:
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
            mine = []
            for _ in range(each):
                os.pwrite(fd, b"y" * 4096, 0)
                t0 = time.perf_counter()
                os.fdatasync(fd)
                mine.append(time.perf_counter() - t0)
            with lock:
                latencies.extend(mine)
        finally:
            os.close(fd)

    workers = [threading.Thread(target=loop, args=(n,)) for n in range(streams)]
    t0 = time.perf_counter()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return statistics.median(latencies) * 1e3, streams * each / (time.perf_counter() - t0)


def disk(folder: Path) -> None:
    """This disk's fdatasync alone, with several streams at once, and alone beside the kicker."""
    for streams in (1, 2, 4, 8):
        p50, rate = fdatasyncs(folder, streams)
        print(f"  {streams} stream(s) of fdatasync: p50 {p50:.2f} ms, {rate:,.0f}/s in all", flush=True)
    kick = kicker(folder)
    try:
        time.sleep(0.5)
        p50, rate = fdatasyncs(folder, 1)
        print(f"  1 stream beside the kicker:   p50 {p50:.2f} ms, {rate:,.0f}/s", flush=True)
    finally:
        kick.kill()
        kick.wait()
    p50, rate = fdatasyncs(folder, 1)
    print(f"  1 stream alone again:         p50 {p50:.2f} ms, {rate:,.0f}/s")


def run(form: str, threads: int, writes: int, burn_us: float, folder: Path) -> dict[str, float]:
    path = str(folder / f"{form}-{threads}-{time.monotonic_ns()}.journal")
    journal: Journal | ChildJournal = Journal(path, lambda records: None) if form == "inproc" else ChildJournal(path)
    records = [record(seq) for seq in range(1, writes + 2)]
    engine = threading.Lock()
    # one write first, so the child has started and the WAL exists for both forms alike
    journal.append(records[0])
    journal.wait(1)
    counter = 1
    latencies: list[list[float]] = [[] for _ in range(threads)]
    per_thread = writes // threads
    start = threading.Barrier(threads + 1)

    def writer(me: int) -> None:
        nonlocal counter
        start.wait()
        mine = latencies[me]
        for _ in range(per_thread):
            with engine:
                if burn_us:
                    burn(burn_us)
                counter += 1
                seq = counter
                journal.append(records[seq - 1])
            t0 = time.perf_counter()
            journal.wait(seq)
            mine.append(time.perf_counter() - t0)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for t in workers:
        t.start()
    before = resource.getrusage(resource.RUSAGE_SELF)
    child_before = journal.child_cpu() if isinstance(journal, ChildJournal) else 0.0
    t0 = time.perf_counter()
    start.wait()
    for t in workers:
        t.join()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    child_cpu = (journal.child_cpu() - child_before) if isinstance(journal, ChildJournal) else 0.0
    journal.close()
    commits = journal.commits
    # what was acknowledged is there, as written (read back as the store's recovery reads it)
    check = Journal(path, lambda records: None)
    try:
        if check.tail(0) != records[:per_thread * threads + 1]:
            raise AssertionError(f"{form}: the journal does not hold the acknowledged writes as written")
    finally:
        check.close()
    for suffix in ("", "-wal", "-shm"):
        Path(path + suffix).unlink(missing_ok=True)
    done = per_thread * threads
    lat = sorted(x for mine in latencies for x in mine)
    return {
        "rate": done / wall,
        "p50": lat[len(lat) // 2] * 1e3,
        "p99": lat[int(len(lat) * 0.99)] * 1e3,
        "cpu": ((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) + child_cpu) / done * 1e6,
        "child_cpu": child_cpu / done * 1e6,
        "vcsw": (after.ru_nvcsw - before.ru_nvcsw) / done,
        "per_commit": done / commits if commits else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writes", type=int, default=3000, help="writes per run (a tenth of it for 1 thread)")
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 8])
    parser.add_argument("--burn", type=float, nargs="*", default=[0, 150], help="µs of Python CPU per write")
    parser.add_argument("--forms", nargs="*", default=["inproc", "child"])
    parser.add_argument("--kick", action="store_true",
                        help="keep a 4 KB O_DIRECT read in flight from another process throughout (see kicker)")
    parser.add_argument("--only-kick", action="store_true",
                        help="run only the kicker, until interrupted (to measure another benchmark beside it)")
    parser.add_argument("--disk", action="store_true",
                        help="only measure fdatasync: alone, 2/4/8 streams at once, beside the kicker")
    args = parser.parse_args()
    if args.disk:
        print(f"load average {os.getloadavg()[0]:.2f}; files in {tempfile.gettempdir()}")
        with tempfile.TemporaryDirectory() as tmp:
            disk(Path(tmp))
        return
    if args.only_kick:
        with tempfile.TemporaryDirectory() as tmp:
            kick = kicker(Path(tmp))
            try:
                kick.wait()
            finally:
                kick.kill()
                kick.wait()
        return
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; files in {tempfile.gettempdir()}")
    results: dict[tuple[str, int, float], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        kick = kicker(Path(tmp)) if args.kick else None
        for rnd in range(args.rounds):
            for threads in args.threads:
                for burn_us in args.burn:
                    writes = args.writes if threads > 1 else max(args.writes // 3, 200)
                    forms = args.forms if rnd % 2 == 0 else list(reversed(args.forms))
                    for form in forms:
                        r = run(form, threads, writes, burn_us, Path(tmp))
                        results.setdefault((form, threads, burn_us), []).append(r)
                        print(f"round {rnd + 1} {form:6} threads {threads} burn {burn_us:>3.0f} µs: "
                              f"{r['rate']:7.0f} writes/s  p50 {r['p50']:.2f} ms  p99 {r['p99']:.2f} ms  "
                              f"CPU {r['cpu']:.0f} µs/write (child {r['child_cpu']:.0f})  "
                              f"vol.sw {r['vcsw']:.2f}/write  per commit {r['per_commit']:.1f}  "
                              f"load {os.getloadavg()[0]:.2f}", flush=True)
        if kick is not None:
            kick.kill()
            kick.wait()
    print("\nmedians (writes/s, p50 ms, p99 ms):")
    for (form, threads, burn_us), rs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        print(f"  {form:6} threads {threads} burn {burn_us:>3.0f}: "
              f"{statistics.median(r['rate'] for r in rs):7.0f}  "
              f"{statistics.median(r['p50'] for r in rs):.2f}  {statistics.median(r['p99'] for r in rs):.2f}  "
              f"(rates {', '.join(format(r['rate'], '.0f') for r in rs)})")


if __name__ == "__main__":
    main()
