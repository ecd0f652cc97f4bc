"""personae's journeys on a real local model: calls, tokens, model time and personae's own time.

Starts llama-cpp-python's server with SmolLM2-135M-Instruct (``bench/_llama.py``, one
thread, 2,048-token window) behind a recording proxy, runs each journey as a user
would (``personae run`` in a fresh project with ``OPENAI_BASE_URL`` and
``PERSONAE_MODEL``), and reports per journey: model requests, tokens, the time the
model took (request sent to answer received, at the proxy), personae's own time (wall
minus model time), start-up to the first model request (wall, and the CPU the child
had used by then), the median and largest gap personae left between two calls, and
the plan-parse and validation rates from the run's events. Side by side: the same
journey's raw model time is what any client would spend; personae's share is the rest.

Goals on a quiet machine: start-up to the first model request at most 0.8 s CPU (read
from ``/proc/<pid>/stat`` when that request reaches the proxy); at most 50 ms of
personae time between calls (median gap between one answer and the next request).

    python bench/bench_real_model.py [--rounds 1] [--label NAME]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
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

from _llama import RecordingProxy, llama_server, missing, real_chain

ROOT = Path(__file__).resolve().parent.parent
MODEL = "openai:smollm2"
BOUNDS = ["--max-requests", "8", "--deadline", "60", "--max-retries", "0"]


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used so far (``None``: gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


def _personae(
    args: list[str], *, cwd: Path, env: dict[str, str], proxy: RecordingProxy | None = None
) -> tuple[Any, float, float, float | None]:
    """Run ``python -m personae ARGS``; returns the finished process (stdout, stderr,
    returncode), its start time, its CPU seconds and the CPU seconds it had used when
    its first model request (not the window probe) reached ``proxy``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "personae", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    at_first: list[float | None] = []

    def first_request(path: str, body: dict[str, Any]) -> None:
        if not at_first and path.endswith("/chat/completions") and body.get("max_tokens") != 1:
            at_first.append(_cpu_of(proc.pid))

    if proxy is not None:
        proxy.on_post = first_request
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proxy is not None:
            proxy.on_post = None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done, started, cpu, at_first[0] if at_first else None


def _init(tmp: Path, env: dict[str, str]) -> Path:
    root = tmp / "proj"
    _personae(["init", str(root)], cwd=tmp, env=env)
    return root


def _sample(tmp: Path, env: dict[str, str]) -> tuple[Path, list[str]]:
    return _init(tmp, env), ["run", "Total March revenue", "--persona", "analyst"]


def _demo(tmp: Path, env: dict[str, str]) -> tuple[Path, list[str]]:
    root = tmp / "demo"
    shutil.copytree(Path(str(resources.files("personae.examples") / "demo" / "project")), root)
    return root, ["run", "Give me the port the service listens on.", "--persona", "maintainer"]


def _handover(tmp: Path, env: dict[str, str]) -> tuple[Path, list[str]]:
    root = _init(tmp, env)
    path = root / "to-analyst.json"
    _personae(["handover", "create", "--to", "analyst", "--task", "Total March revenue",
               "--out", str(path)], cwd=root, env=env)  # fmt: skip
    return root, ["run", "--context-from", str(path), "--non-interactive"]


def _chain(tmp: Path, env: dict[str, str]) -> tuple[Path, list[str]]:
    root = tmp / "chain"
    real_chain(root, 60)
    return root, ["chain", "run", "workflow.yaml"]


JOURNEYS = {"init + sample task": _sample, "demo project": _demo, "handover": _handover,
            "chain (2 steps)": _chain}  # fmt: skip


def _chain_status(root: Path) -> str:
    """The chain's steps' statuses from its report (``missing``: no report)."""
    report = root / ".personae" / "chains" / "sales-report" / "report.json"
    if not report.is_file():
        return "missing"
    steps = json.loads(report.read_text()).get("steps") or {}
    return "+".join(str(step.get("status")) for step in steps.values())


def _measure(name: str, proxy: RecordingProxy, env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="personae-bench-") as folder:
        root, args = JOURNEYS[name](Path(folder), env)
        first = len(proxy.times)
        chain = args[0] == "chain"  # runs each step in a child: no --json, its own report
        full = args if chain else [*args, "--json", *BOUNDS]
        done, started, cpu, first_cpu = _personae(full, cwd=root, env=env, proxy=proxy)
        ended = time.monotonic()
        chained = _chain_status(root) if chain else None
    events = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{")]
    sent = zip(proxy.requests[first:], proxy.times[first:], strict=True)
    calls = [(body, t) for (path, body), t in sent
             if path.endswith("/chat/completions") and t[0] >= started]  # fmt: skip
    # (a request an earlier journey hung up on may end now: it is not this journey's)
    real = [(b, t) for b, t in calls if b.get("max_tokens") != 1]  # not the window probe
    model_s = sum(end - start for _, (start, end) in calls)
    gaps = [b[0] - a[1] for (_, a), (_, b) in itertools.pairwise(real)]
    final = events[-1] if events and events[-1]["kind"] == "final" else None
    plans = sum(1 for e in events if e["kind"] == "plan")
    unparsed = sum(1 for e in events if e["data"].get("action") == "plan_unparsed")
    validations = [e for e in events if e["kind"] == "validation"]
    usage = (final or {}).get("data", {}).get("usage", {})
    wall = ended - started
    return {
        "journey": name,
        "status": chained or (final["data"]["status"] if final else f"exit {done.returncode}"),
        "requests": len(real),
        "input_tokens": usage.get("input_tokens", 0),
        "output_tokens": usage.get("output_tokens", 0),
        "wall_s": round(wall, 2),
        "model_s": round(model_s, 2),
        "personae_s": round(wall - model_s, 2),
        "personae_cpu_s": round(cpu, 2),
        "first_request_s": round(real[0][1][0] - started, 2) if real else None,
        "first_request_cpu_s": (
            round(first_cpu, 3) if first_cpu is not None and not chain else None
        ),  # a chain's first request comes from its step's child, not the process timed
        "probed": any(b.get("max_tokens") == 1 for b, _ in calls),
        "gap_median_ms": round(statistics.median(gaps) * 1000, 1) if gaps else None,
        "gap_max_ms": round(max(gaps) * 1000, 1) if gaps else None,
        "plan_parsed": f"{plans - unparsed}/{plans}",
        "validated": f"{sum(1 for v in validations if v['data'].get('approved'))}/"
        f"{len(validations)}",
        "capped": all(int(b.get("max_tokens") or 0) > 0 for b, _ in real),
        "traceback": "Traceback" in done.stderr,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=1, help="runs of each journey")
    parser.add_argument("--label", default="", help="suffix of the results file")
    args = parser.parse_args()
    why = missing()
    if why is not None:
        sys.exit(f"bench_real_model: {why}")
    rows: list[dict[str, Any]] = []
    with (tempfile.TemporaryDirectory(prefix="personae-bench-home-") as home,
          llama_server() as upstream, RecordingProxy(upstream) as proxy):  # fmt: skip
        # one data folder for the whole bench, as on a user's machine: the first run asks
        # the server its window (the overflow probe), later runs remember it
        env = {**os.environ, "OPENAI_BASE_URL": proxy.base_url, "PERSONAE_MODEL": MODEL,
               "PYTHONPATH": str(ROOT / "src"), "PERSONAE_HOME": home}  # fmt: skip
        for _ in range(args.rounds):
            rows += [_measure(name, proxy, env) for name in JOURNEYS]
    head = (f"{'journey':<20} {'status':<8} {'req':>4} {'tok in/out':>11} {'wall s':>7} "
            f"{'model s':>8} {'ours s':>7} {'cpu s':>6} {'1st req':>7} {'cpu@1st':>7} "
            f"{'gap ms':>7} {'max gap':>7} {'plans':>6} {'valid':>6}")  # fmt: skip
    print(head)
    for r in rows:
        tokens = f"{r['input_tokens']}/{r['output_tokens']}"
        print(f"{r['journey']:<20} {r['status']:<8} {r['requests']:>4} {tokens:>11} "
              f"{r['wall_s']:>7} {r['model_s']:>8} {r['personae_s']:>7} "
              f"{r['personae_cpu_s']:>6} {r['first_request_s']!s:>7} "
              f"{r['first_request_cpu_s']!s:>7} {r['gap_median_ms']!s:>7} "
              f"{r['gap_max_ms']!s:>7} {r['plan_parsed']:>6} {r['validated']:>6}"
              + ("  (window probe)" if r["probed"] else ""))  # fmt: skip
    cpus = [r["first_request_cpu_s"] for r in rows if r["first_request_cpu_s"] is not None]
    gaps = [r["gap_median_ms"] for r in rows if r["gap_median_ms"] is not None]
    if cpus:
        print(f"CPU from start to the first model request: median {statistics.median(cpus)} s "
              f"(goal <= 0.8 s)")  # fmt: skip
    if gaps:
        print(f"personae's time between calls: median of medians {statistics.median(gaps)} ms "
              f"(goal <= 50 ms)")  # fmt: skip
    load = os.getloadavg()
    print(f"load average: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    name = f"real_model-{args.label}.json" if args.label else "real_model.json"
    out = ROOT / "bench" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "load": load, "cpus": os.cpu_count()}, indent=2))
    print(f"written: {out}")


if __name__ == "__main__":
    main()
