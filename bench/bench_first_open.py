"""First open of a fresh ``state.db`` by many processes at once: failures counted.

Run: .venv/bin/python bench/bench_first_open.py [--src DIR] [--rounds 30] [--workers 8] [--cli 80]

1. ``rounds`` fresh databases, each opened (and migrated) by ``workers``
   spawned processes released together by a barrier (30 x 8 = 240 opens).
2. ``cli`` real ``personae handover create`` processes on a fresh project:
   each does its imports, then waits at a start line (a file) so that all of
   them race to create and migrate the store at the same moment.

``--src`` runs the same figures against another source tree (for example
main's, unpacked with ``git archive main src | tar -x -C /tmp/main``) to get
the "before" numbers side by side. Prints a table and writes
``bench/results/first_open.json`` (``first_open-<label>.json`` with ``--label``).
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
from collections import Counter
from pathlib import Path
from typing import Any

from _race_start import spawn_at_start_line

ROOT = Path(__file__).resolve().parent.parent


def _opener(src: str, paths: list[str], barrier: Any, results: Any) -> None:
    sys.path.insert(0, src)
    from personae.store.db import Store

    for path in paths:
        barrier.wait(timeout=120)
        try:
            Store(path).close()
            results.put(None)
        except Exception as exc:  # counted, never hidden
            results.put(f"{type(exc).__name__}: {str(exc).rpartition(': ')[2]}")


def race_opens(src: str, rounds: int, workers: int) -> dict[str, Any]:
    """``rounds`` fresh databases, each opened by ``workers`` processes at one barrier."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        paths = [str(Path(tmp) / f"r{i}" / "state.db") for i in range(rounds)]
        procs = [
            ctx.Process(target=_opener, args=(src, paths, barrier, results)) for _ in range(workers)
        ]
        t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        for proc in procs:
            proc.start()
        errors = [results.get(timeout=300) for _ in range(rounds * workers)]
        for proc in procs:
            proc.join()
        wall = time.perf_counter() - t0
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    failed = [e for e in errors if e is not None]
    return {
        "opens": rounds * workers,
        "failures": len(failed),
        "reasons": dict(Counter(failed).most_common(5)),
        "wall_s": round(wall, 2),
        "cpu_s": round(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime, 2),
    }


def race_cli(src: str, count: int) -> dict[str, Any]:
    """``count`` ``handover create`` commands released at once on a fresh project."""
    env = {**os.environ, "PYTHONPATH": src, "COLUMNS": "120"}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        create = ["handover", "create", "--to", "researcher", "--task"]
        commands = [[*create, f"task {i}"] for i in range(count)]
        procs, go = spawn_at_start_line(commands, cwd=project, env=env, marks=Path(tmp) / "marks")
        t0 = time.perf_counter()
        go.touch()
        failed = []
        for proc in procs:
            _out, err = proc.communicate(timeout=600)
            if proc.returncode != 0:
                failed.append(err.strip().splitlines()[-1][-160:] if err.strip() else "no output")
        wall = time.perf_counter() - t0
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "commands": count,
        "failures": len(failed),
        "reasons": dict(Counter(failed).most_common(5)),
        "wall_s_after_start_line": round(wall, 2),
        "cpu_s": round(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--src", default=str(ROOT / "src"), help="source tree to import")
    parser.add_argument("--label", default="", help="suffix of the results file")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--cli", type=int, default=80)
    args = parser.parse_args()
    src = str(Path(args.src).resolve())
    opens = race_opens(src, args.rounds, args.workers)
    cli = race_cli(src, args.cli) if args.cli else None
    load = os.getloadavg()[0]
    print(f"source: {src}")
    print(f"{'case':<34} {'failures':>10} {'wall s':>8} {'cpu s':>8}")
    rows = [(f"{opens['opens']} synchronized first opens", opens)]
    if cli is not None:
        rows.append((f"{cli['commands']} parallel handover create", cli))
    for case, row in rows:
        wall = row.get("wall_s", row.get("wall_s_after_start_line"))
        print(f"{case:<34} {row['failures']:>10} {wall:>8} {row['cpu_s']:>8}")
    for reason, n in {**opens["reasons"], **(cli or {}).get("reasons", {})}.items():
        print(f"  {n} x {reason}")
    print(f"load average: {load:.1f} on {os.cpu_count()} cores")
    name = f"first_open-{args.label}.json" if args.label else "first_open.json"
    out = ROOT / "bench" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    results = {"src": src, "opens": opens, "cli": cli, "load": load, "cpus": os.cpu_count()}
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
