"""Handover benchmarks: file round trip, child spawn latency, fan-out vs sequential, and a
handover referencing a multi-GB file.

The large-file part writes a sparse multi-GB CSV (``--gib``, default 2: a header and 1,000
rows, the rest a hole; nothing past the first KiB is on disk), then creates, validates and
loads a handover that references it (format detection and the artifact summary included)
and counts the bytes this process read (``/proc/self/io`` rchar). Side by side: reading
the file whole once, what a copy, an upload or a checksum of the artifact costs.

Run: ``PYTHONPATH=src python bench/bench_handover.py [--children 8] [--quick]``.
Prints a table and writes ``bench/results/handover.json``. Children run the
example project's personas on the SCRIPTED replay server (a loopback server replaying
a scenario; not a real language model).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from personae.handover.create import HandoverContent, build_handover, write_handover  # noqa: E402
from personae.handover.files import read_handover  # noqa: E402
from personae.handover.runflow import load_policy  # noqa: E402
from personae.handover.schema import ArtifactFile  # noqa: E402
from personae.workflow.chain import execute_chain  # noqa: E402
from personae.workflow.spec import load_workflow  # noqa: E402

TARGETS = {"create_validate_load_ms": 50.0, "spawn_to_first_event_s": 1.5}


def _example(dest: Path) -> Path:
    src = Path(str(resources.files("personae.examples") / "chain"))
    shutil.copytree(src, dest)
    return dest


def bench_file(root: Path, n_artifacts: int, repeats: int) -> dict[str, Any]:
    """create (build + safety check + atomic write + ledger) + validate + load, 1,000 artifacts."""
    files = [
        ArtifactFile(path=f"data/part-{i:04d}.h5", type="data", description=f"shard {i}")
        for i in range(n_artifacts)
    ]
    policy, allow = load_policy(root)
    create_ms, load_ms, total_ms, cpu_ms = [], [], [], []
    size = 0
    for _ in range(repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        h = build_handover(
            source_persona="data-analyst",
            target_persona="report-writer",
            task="Summarise the shards",
            cwd=root,
            content=HandoverContent(files=files, insights=["one", "two"], data={"rows": 10_000}),
        )
        created = write_handover(h, cwd=root)
        t1 = time.perf_counter()
        loaded = read_handover(created.path, policy=policy, env_allow=allow)
        t2 = time.perf_counter()
        cpu_ms.append((time.process_time() - c0) * 1000)
        assert len(loaded.handover.artifacts.files) == n_artifacts
        size = created.path.stat().st_size
        create_ms.append((t1 - t0) * 1000)
        load_ms.append((t2 - t1) * 1000)
        total_ms.append((t2 - t0) * 1000)
    return {
        "artifacts": n_artifacts,
        "file_bytes": size,
        "repeats": repeats,
        "create_ms_median": statistics.median(create_ms),
        "validate_load_ms_median": statistics.median(load_ms),
        "create_validate_load_ms_median": statistics.median(total_ms),
        "create_validate_load_ms_p90": sorted(total_ms)[int(0.9 * (len(total_ms) - 1))],
        "create_validate_load_cpu_ms_median": statistics.median(cpu_ms),
    }


def _read_bytes() -> int:
    """Bytes this process has read through read(2) so far (Linux ``/proc/self/io``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no rchar line")


def bench_large(root: Path, gib: int) -> dict[str, Any]:
    """A handover referencing a sparse ``gib`` GiB CSV, next to reading that file whole."""
    big = root / "data" / "huge.csv"
    big.parent.mkdir(parents=True, exist_ok=True)
    with big.open("wb") as fh:
        fh.write(b"id,value\n" + b"1,2\n" * 1000)
        fh.truncate(gib * 1024**3)
    policy, allow = load_policy(root)
    read0, c0, t0 = _read_bytes(), time.process_time(), time.perf_counter()
    h = build_handover(
        source_persona="data-analyst", target_persona="report-writer",
        task="Summarise the large table", cwd=root,
        content=HandoverContent(files=[{"path": "data/huge.csv", "type": "data"}]),
    )  # fmt: skip
    created = write_handover(h, cwd=root)
    loaded = read_handover(created.path, policy=policy, env_allow=allow)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    read = _read_bytes() - read0
    [art] = loaded.handover.artifacts.files
    assert art.format == "csv" and art.summary and "at least 1000 rows" in art.summary
    r0, c1, t1 = _read_bytes(), time.process_time(), time.perf_counter()
    digest = hashlib.sha256()
    with big.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    whole_wall, whole_cpu = time.perf_counter() - t1, time.process_time() - c1
    whole_read = _read_bytes() - r0
    big.unlink()
    return {
        "file_bytes": gib * 1024**3,
        "handover_wall_ms": wall * 1000,
        "handover_cpu_ms": cpu * 1000,
        "handover_bytes_read": read,
        "handover_file_bytes": created.path.stat().st_size,
        "summary": art.summary,
        "read_whole_wall_s": whole_wall,
        "read_whole_cpu_s": whole_cpu,
        "read_whole_bytes_read": whole_read,
    }


def bench_spawn(root: Path, repeats: int) -> dict[str, Any]:
    """Seconds from spawning `personae run --context-from ... --json` to its first event line."""
    h = build_handover(
        source_persona="data-analyst",
        target_persona="report-writer",
        task="Write report.md from the figures.",
        cwd=root,
        content=HandoverContent(insights=["total revenue 12900"]),
    )
    path = write_handover(h, cwd=root).path
    firsts, plans, totals, cpus = [], [], [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        argv = [
            sys.executable, "-m", "personae", "run", "--persona", "report-writer",
            "--context-from", str(path), "--non-interactive", "--json",
            "--model", "scripted:report.scenario.yaml",
        ]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        t1 = time.perf_counter()
        second = proc.stdout.readline()  # the first team event (plan), after the imports
        t_plan = time.perf_counter()
        proc.stdout.read()
        proc.wait()
        t2 = time.perf_counter()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if not first.strip():
            raise SystemExit("child produced no event")
        if json.loads(first)["kind"] != "start" or json.loads(second)["kind"] != "plan":
            raise SystemExit(f"unexpected first events: {first[:80]!r} {second[:80]!r}")
        firsts.append(t1 - t0)
        plans.append(t_plan - t0)
        totals.append(t2 - t0)
    return {
        "repeats": repeats,
        "spawn_to_first_event_s_median": statistics.median(firsts),
        "spawn_to_first_event_s_min": min(firsts),
        "spawn_to_plan_event_s_median": statistics.median(plans),
        "child_total_s_median": statistics.median(totals),
        "child_cpu_s_median": statistics.median(cpus),
    }


def _fanout_workflow(root: Path, children: int) -> Path:
    steps = [
        {
            "id": f"a{i}",
            "persona": "data-analyst",
            "task": f"Compute revenue per region from data/sales.csv (copy {i}).",
            "model": "scripted:analysis.scenario.yaml",
        }
        for i in range(children)
    ]
    body = {"name": "fanout", "defaults": {"timeout": 300, "retries": 0}, "steps": [
        {"parallel": steps}
    ]}  # fmt: skip
    path = root / "fanout.yaml"
    path.write_text(json.dumps(body))
    return path


def bench_fanout(base: Path, children: int) -> dict[str, Any]:
    """Wall time of N scripted children fanned out (concurrency N) vs one by one."""
    out: dict[str, Any] = {"children": children, "cpus": os.cpu_count()}
    for label, concurrency in (("parallel", children), ("sequential", 1)):
        root = _example(base / f"fanout-{label}")
        wf = load_workflow(_fanout_workflow(root, children))
        t0 = time.perf_counter()
        outcome = execute_chain(wf, concurrency=concurrency)
        out[f"{label}_s"] = time.perf_counter() - t0
        out[f"{label}_status"] = outcome.status
    out["speedup"] = out["sequential_s"] / out["parallel_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument(
        "--only",
        choices=("file", "spawn", "fanout", "large"),
        action="append",
        help="run only these",
    )
    parser.add_argument("--gib", type=int, default=2, help="size of the large file (sparse)")
    args = parser.parse_args()
    parts = set(args.only or ("file", "spawn", "fanout", "large"))
    env_pp = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT / "src"), env_pp] if p)
    with tempfile.TemporaryDirectory(prefix="bench-handover-") as tmp:
        base = Path(tmp)
        file = (
            bench_file(_example(base / "file"), 1000, 10 if args.quick else 30)
            if "file" in parts
            else None
        )
        spawn = bench_spawn(_example(base / "spawn"), 2 if args.quick else 5) if (
            "spawn" in parts
        ) else None  # fmt: skip
        fanout = bench_fanout(base, args.children) if "fanout" in parts else None
        large = bench_large(_example(base / "large"), args.gib) if "large" in parts else None
    results = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_1m": os.getloadavg()[0],
        },
        "targets": TARGETS,
        "file_round_trip": file,
        "spawn": spawn,
        "fanout": fanout,
        "large_file": large,
        "model": "scripted (loopback replay server; not a real model)",
    }
    rows: list[tuple[str, str, str, bool | None]] = []
    if file is not None:
        rows += [
            ("create+validate+load, 1,000 artifacts (median)",
             f"{file['create_validate_load_ms_median']:.1f} ms", "< 50 ms",
             file["create_validate_load_ms_median"] < TARGETS["create_validate_load_ms"]),
            ("  the same, CPU time of this process (median)",
             f"{file['create_validate_load_cpu_ms_median']:.1f} ms", "< 50 ms",
             file["create_validate_load_cpu_ms_median"] < TARGETS["create_validate_load_ms"]),
            ("  of which create (build+check+write+ledger)",
             f"{file['create_ms_median']:.1f} ms", "", None),
            ("  of which validate+load", f"{file['validate_load_ms_median']:.1f} ms", "", None),
        ]  # fmt: skip
    if spawn is not None:
        rows += [
            ("spawn -> first event of a child run (median)",
             f"{spawn['spawn_to_first_event_s_median']:.2f} s", "< 1.5 s",
             spawn["spawn_to_first_event_s_median"] < TARGETS["spawn_to_first_event_s"]),
            ("  spawn -> plan event (team loaded, median)",
             f"{spawn['spawn_to_plan_event_s_median']:.2f} s", "", None),
            ("  child run, whole (median wall / CPU)",
             f"{spawn['child_total_s_median']:.1f}/{spawn['child_cpu_s_median']:.1f} s", "", None),
        ]  # fmt: skip
    if fanout is not None:
        rows += [
            (f"fan-out of {fanout['children']} scripted children",
             f"{fanout['parallel_s']:.1f} s", "", None),
            (f"the same {fanout['children']} one by one", f"{fanout['sequential_s']:.1f} s", "",
             None),
            ("speed-up", f"{fanout['speedup']:.2f}x", f"{os.cpu_count()} cores", None),
        ]  # fmt: skip
    if large is not None:
        size = f"{large['file_bytes'] / 1024**3:.0f} GiB"
        rows += [
            (f"handover referencing a {size} file (wall / CPU)",
             f"{large['handover_wall_ms']:.0f}/{large['handover_cpu_ms']:.0f} ms", "", None),
            ("  bytes read by it (all files, incl. the CSV's first MiB)",
             f"{large['handover_bytes_read'] / 1024**2:.1f} MiB", "< file",
             large["handover_bytes_read"] < large["file_bytes"] / 100),
            ("  the handover file itself", f"{large['handover_file_bytes']} B", "", None),
            (f"reading the {size} file whole once (wall / CPU)",
             f"{large['read_whole_wall_s']:.1f}/{large['read_whole_cpu_s']:.1f} s", "", None),
            ("  bytes read by it", f"{large['read_whole_bytes_read'] / 1024**2:.0f} MiB", "",
             None),
        ]  # fmt: skip
    print(f"{'benchmark':<50} {'result':>10}  {'target':<10} ok")
    for name, value, target, ok in rows:
        mark = "" if ok is None else ("yes" if ok else "NO")
        print(f"{name:<50} {value:>10}  {target:<10} {mark}")
    print(f"load average while running: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    name = "handover.json" if len(parts) == 4 else f"handover-{'-'.join(sorted(parts))}.json"
    out = ROOT / "bench" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
