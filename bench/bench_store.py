"""Store throughput: 8 writer processes x 500 appends, SQLite vs PostgreSQL, same run.

Run: .venv/bin/python bench/bench_store.py [--writers 8] [--appends 500] [--label NAME]

Each writer is a spawned process that opens the store, creates its conversation session,
waits at a barrier, then appends ``appends`` messages one at a time (one transaction each,
counted with o200k_base as in real use). Two workloads:

* ``own``: every writer appends to its own session (independent conversations);
* ``shared``: all writers append to one session (every append locks the same row).

Backends, in one run on the same machine:

* ``sqlite``: one WAL file, ``synchronous=NORMAL`` (the default store);
* ``postgres``: a throwaway local server (``tests/_pg.py``, unix socket, fsync on) with
  ``synchronous_commit=off`` for the database (crash-safe, may lose the last few hundred
  ms of commits on an OS crash: the same promise as SQLite's WAL + NORMAL);
* ``postgres-durable``: the same server with ``synchronous_commit=on`` (every commit
  flushed: what a shared server gives by default).

Wall time is from the barrier to the last writer done; writer CPU is summed over the
writers' append loops (getrusage); server CPU is the PostgreSQL processes' CPU over the
run (from /proc). Prints a table and writes ``bench/results/store.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from _pg import PgServer, dbname  # noqa: E402  (the tests' throwaway server)


def _writer(  # noqa: PLR0917 - a multiprocessing target takes positional arguments
    path: str, url: str | None, mode: str, me: int, n: int, barrier: Any, out: Any
) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from personae.store import Store
    from personae.store.conversations import ConversationStore, Message
    from personae.tokens import exact_counter

    store = Store(path, url=url)
    conv = ConversationStore(store, exact_counter("o200k_base"))
    sid = "shared" if mode == "shared" else f"writer-{me}"
    if mode != "shared" or me == 0:
        conv.create_session(session_id=sid)
    conv.counter.count("warm up the tokenizer")
    barrier.wait(timeout=120)
    if mode == "shared":
        while True:  # writer 0 creates the session right before the barrier
            try:
                conv.session(sid)
                break
            except Exception:
                time.sleep(0.001)
    start = resource.getrusage(resource.RUSAGE_SELF)
    failures = 0
    for i in range(n):
        try:
            conv.append(sid, Message("user", f"writer {me} message {i}: status update, all fine"))
        except Exception:  # counted, never hidden
            failures += 1
    end = resource.getrusage(resource.RUSAGE_SELF)
    store.close()
    cpu = (end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime)
    out.put((me, cpu, failures, time.perf_counter()))


def _server_cpu(server: PgServer | None) -> float:
    """CPU seconds of the server's processes so far (live ones plus reaped backends)."""
    if server is None:
        return 0.0
    pid_file = server.data / "postmaster.pid"
    master = int(pid_file.read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        pid, ppid = int(entry), int(fields[1])
        if pid == master:
            total += sum(int(f) for f in fields[11:15]) / tick  # utime stime cutime cstime
        elif ppid == master:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def run(
    backend: str, mode: str, writers: int, appends: int, server: PgServer | None
) -> dict[str, Any]:
    """One workload on one backend: figures for the table."""
    url = None
    if server is not None:
        url = server.database(migrated=True)
        sync = "on" if backend == "postgres-durable" else "off"
        server.admin(f"ALTER DATABASE {dbname(url)} SET synchronous_commit = {sync}")
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(writers + 1), ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "state.db")
        if url is None:
            from personae.store import Store

            Store(path).close()  # created and migrated before the race
        procs = [
            ctx.Process(target=_writer, args=(path, url, mode, i, appends, barrier, out))
            for i in range(writers)
        ]
        for proc in procs:
            proc.start()
        barrier.wait(timeout=300)
        t0, server0 = time.perf_counter(), _server_cpu(server)
        results = [out.get(timeout=600) for _ in procs]
        wall = max(r[3] for r in results) - t0
        server_cpu = _server_cpu(server) - server0
        for proc in procs:
            proc.join(timeout=60)
    if server is not None and url is not None:
        server.drop(url)
    total = writers * appends
    failures = sum(r[2] for r in results)
    return {
        "backend": backend,
        "mode": mode,
        "appends": total,
        "failures": failures,
        "wall_s": round(wall, 3),
        "appends_per_s": round((total - failures) / wall, 1),
        "writer_cpu_s": round(sum(r[1] for r in results), 3),
        "server_cpu_s": round(server_cpu, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    load_before = os.getloadavg()
    server = PgServer(settings="-c shared_buffers=64MB")
    server.start()
    rows = []
    try:
        for mode in ("own", "shared"):
            for backend in ("sqlite", "postgres", "postgres-durable"):
                pg = None if backend == "sqlite" else server
                rows.append(run(backend, mode, args.writers, args.appends, pg))
    finally:
        server.stop()
    load_after = os.getloadavg()
    header = f"{'backend':<17} {'mode':<7} {'appends':>7} {'fail':>4} {'wall s':>7} "
    header += f"{'app/s':>8} {'writer CPU s':>12} {'server CPU s':>12}"
    print(header)
    for r in rows:
        print(
            f"{r['backend']:<17} {r['mode']:<7} {r['appends']:>7} {r['failures']:>4} "
            f"{r['wall_s']:>7.2f} {r['appends_per_s']:>8.1f} {r['writer_cpu_s']:>12.2f} "
            f"{r['server_cpu_s']:>12.2f}"
        )
    print(f"load average before {load_before}, after {load_after}; {os.cpu_count()} CPUs")
    result = {
        "writers": args.writers,
        "appends_per_writer": args.appends,
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "rows": rows,
    }
    folder = ROOT / "bench" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"store-{args.label}.json" if args.label else "store.json"
    (folder / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote bench/results/{name}")


if __name__ == "__main__":
    main()
