"""personae's journeys on a real local model: calls, tokens, model time and personae's own time.

Starts llama-cpp-python's server with SmolLM2-135M-Instruct (``bench/_llama.py``, one
thread, 2,048-token window) behind a recording proxy, runs each journey as a user
would (``personae`` in a fresh process, in a fresh project, with ``OPENAI_BASE_URL``
and ``PERSONAE_MODEL``), and reports per journey: model requests, tokens, the time the
model took (request's first bytes to answer sent, at the proxy), personae's own time
(wall minus model time), start-up to the first model request and personae's time
between calls, and the plan-parse and validation rates from the run's events. Side by
side: the model's time is what any client would spend; personae's share is the rest.

How it is measured:

- start-up: from the process's start (a fresh ``python -m personae``, nothing running
  before it) to the first bytes of its first model request reaching the proxy (the
  window probe, a 1-token request sent once per server and model, is not a model
  request; a journey that sent it says ``probe``). CPU is the process's user + system
  time then (``/proc/<pid>/stat``), wall the time since it was started.
- between calls: from the moment the proxy has sent a model request's whole answer to
  the first bytes of the next model request: the process's CPU used in between and the
  wall time. A chain's requests come from its steps' child processes: its gaps are
  shown (wall only) but left out of the summary.
- personae's sources are compiled to bytecode once before the journeys (in a temporary
  cache, ``PYTHONPYCACHEPREFIX``), as an installed package is: this machine sets
  ``PYTHONDONTWRITEBYTECODE``, which would make every start compile them again.

The machine is shared (load is printed, ``uptime``): CPU time is the figure that load
disturbs least; wall time is shown next to it. To reach the Validator within a bounded
time on a small CPU model, every request's output is capped at ``--max-output`` tokens
(a ``models:`` entry in each journey's project) and each run has ``--deadline`` s.

Goals on a quiet machine: start-up to the first model request at most 0.8 s CPU; at
most 50 ms of personae time between calls.

    python bench/bench_real_model.py [--rounds 1] [--journeys demo,sample] [--label NAME]
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
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from _llama import RecordingProxy, llama_server, missing, real_chain

ROOT = Path(__file__).resolve().parent.parent
MODEL = "openai:smollm2"
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
) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run ``python -m personae ARGS`` (``proxy`` samples its CPU at each request);
    returns the finished process, its start time and the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "personae", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    if proxy is not None:
        proxy.sampler = lambda: (time.monotonic(), _cpu_of(proc.pid))
    try:
        out, err = proc.communicate(timeout=900)
    finally:
        if proxy is not None:
            proxy.sampler = None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), started, cpu


def _cap_output(root: Path, max_output: int) -> None:
    """Give the project a ``models:`` entry capping every request at ``max_output``."""
    path = root / ".personae" / "config.yaml"
    config = yaml.safe_load(path.read_text()) if path.is_file() else None
    config = config if isinstance(config, dict) else {}
    config.setdefault("models", {})[MODEL] = {"max_output": max_output}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _init(tmp: Path, env: dict[str, str]) -> Path:
    root = tmp / "proj"
    _personae(["init", str(root)], cwd=tmp, env=env)
    return root


def _sample(tmp: Path, env: dict[str, str], deadline: int) -> tuple[Path, list[str]]:
    return _init(tmp, env), ["run", "Total March revenue", "--persona", "analyst"]


def _demo(tmp: Path, env: dict[str, str], deadline: int) -> tuple[Path, list[str]]:
    root = tmp / "demo"
    shutil.copytree(Path(str(resources.files("personae.examples") / "demo" / "project")), root)
    return root, ["run", "Give me the port the service listens on.", "--persona", "maintainer"]


def _handover(tmp: Path, env: dict[str, str], deadline: int) -> tuple[Path, list[str]]:
    root = _init(tmp, env)
    path = root / "to-analyst.json"
    _personae(["handover", "create", "--to", "analyst", "--task", "Total March revenue",
               "--out", str(path)], cwd=root, env=env)  # fmt: skip
    return root, ["run", "--context-from", str(path), "--non-interactive"]


def _chain(tmp: Path, env: dict[str, str], deadline: int) -> tuple[Path, list[str]]:
    root = tmp / "chain"
    real_chain(root, deadline)
    return root, ["chain", "run", "workflow.yaml"]


Journey = Callable[[Path, dict[str, str], int], tuple[Path, list[str]]]
JOURNEYS: dict[str, tuple[str, Journey]] = {
    "sample": ("init + sample task", _sample),
    "demo": ("demo project", _demo),
    "handover": ("handover", _handover),
    "chain": ("chain (2 steps)", _chain),
}


def _chain_status(root: Path) -> str:
    """The chain's steps' statuses from its report (``missing``: no report)."""
    report = root / ".personae" / "chains" / "sales-report" / "report.json"
    if not report.is_file():
        return "missing"
    steps = json.loads(report.read_text()).get("steps") or {}
    return "+".join(str(step.get("status")) for step in steps.values())


def _stats(values: list[float]) -> dict[str, float | None]:
    """Mean and median (``None`` when there are none)."""
    if not values:
        return {"mean": None, "median": None}
    return {
        "mean": round(statistics.fmean(values), 1),
        "median": round(statistics.median(values), 1),
    }


def _measure(key: str, proxy: RecordingProxy, env: dict[str, str], args: Any) -> dict[str, Any]:
    name, journey = JOURNEYS[key]
    with tempfile.TemporaryDirectory(prefix="personae-bench-") as folder:
        root, command = journey(Path(folder), env, args.deadline)
        first = len(proxy.requests)
        chain = command[0] == "chain"  # runs each step in a child: no --json, its own report
        _cap_output(root, args.max_output)  # a chain's steps run in the same project
        bounds = ["--max-requests", str(args.max_requests), "--deadline", str(args.deadline),
                  "--max-retries", "0"]  # fmt: skip
        full = command if chain else [*command, "--json", *bounds]
        done, started, cpu = _personae(full, cwd=root, env=env, proxy=proxy)
        ended = time.monotonic()
        chained = _chain_status(root) if chain else None
    events = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{")]
    sent = list(zip(proxy.requests[first:], proxy.times[first:], proxy.samples[first:],
                    strict=True))  # fmt: skip
    calls = [(body, t, s) for (path, body), t, s in sent
             if path.endswith("/chat/completions") and t[0] >= started]  # fmt: skip
    # (a request an earlier journey hung up on may end now: it is not this journey's)
    real = [(b, t, s) for b, t, s in calls if b.get("max_tokens") != 1]  # not the probe
    model_s = sum(end - start for _, (start, end), _ in calls)
    gaps_ms, gap_cpu_ms = [], []
    for (_, _, (_, a_end)), (_, _, (b_first, _)) in itertools.pairwise(real):
        if a_end is None or b_first is None:
            continue
        gaps_ms.append((b_first[0] - a_end[0]) * 1000)
        if not chain and a_end[1] is not None and b_first[1] is not None:
            gap_cpu_ms.append((b_first[1] - a_end[1]) * 1000)
    first_sample = real[0][2][0] if real else None
    final = events[-1] if events and events[-1]["kind"] == "final" else None
    plans = sum(1 for e in events if e["kind"] == "plan")
    unparsed = sum(1 for e in events if e["data"].get("action") == "plan_unparsed")
    verdicts = [e for e in events if e["kind"] == "validation"]
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
        "probed": any(b.get("max_tokens") == 1 for b, _, _ in calls),
        "start_wall_s": round(first_sample[0] - started, 2) if first_sample else None,
        # a chain's first request comes from its step's child, not the process sampled
        "start_cpu_s": first_sample[1] if first_sample and not chain else None,
        "gaps_ms": [round(g, 1) for g in gaps_ms],
        "gap_cpu_ms": [round(g, 1) for g in gap_cpu_ms],
        "plans": plans,
        "plans_parsed": plans - unparsed,
        "verdicts": len(verdicts),
        "approved": sum(1 for v in verdicts if v["data"].get("approved")),
        "capped": all(0 < int(b.get("max_tokens") or 0) <= args.max_output for b, _, _ in real),
        "traceback": "Traceback" in done.stderr or "Traceback" in done.stdout,
    }


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _print(rows: list[dict[str, Any]]) -> dict[str, Any]:
    head = (f"{'journey':<19} {'status':<15} {'req':>3} {'tok in/out':>10} {'wall s':>6} "
            f"{'model s':>7} {'ours s':>6} {'cpu s':>5} {'start s':>7} {'start cpu':>9} "
            f"{'gap ms (wall)':>13} {'gap cpu ms':>10} {'plans':>5} {'valid':>5}")  # fmt: skip
    print(head)
    for r in rows:
        tokens = f"{r['input_tokens']}/{r['output_tokens']}"
        wall_gap = _stats(r["gaps_ms"])["median"]
        cpu_gap = _stats(r["gap_cpu_ms"])["median"]
        print(f"{r['journey']:<19} {r['status']:<15} {r['requests']:>3} {tokens:>10} "
              f"{r['wall_s']:>6} {r['model_s']:>7} {r['personae_s']:>6} "
              f"{r['personae_cpu_s']:>5} {r['start_wall_s']!s:>7} {r['start_cpu_s']!s:>9} "
              f"{wall_gap!s:>13} {cpu_gap!s:>10} {r['plans_parsed']}/{r['plans']:<3} "
              f"{r['approved']}/{r['verdicts']}"
              + ("  (window probe sent)" if r["probed"] else ""))  # fmt: skip
    starts = [r["start_cpu_s"] for r in rows if r["start_cpu_s"] is not None and not r["probed"]]
    probed = [r["start_cpu_s"] for r in rows if r["start_cpu_s"] is not None and r["probed"]]
    start_walls = [r["start_wall_s"] for r in rows
                   if r["start_wall_s"] is not None and not r["probed"]
                   and not r["journey"].startswith("chain")]  # fmt: skip
    pooled = [g for r in rows if not r["journey"].startswith("chain") for g in r["gaps_ms"]]
    pooled_cpu = [g for r in rows for g in r["gap_cpu_ms"]]
    plans = sum(r["plans"] for r in rows)
    verdicts = sum(r["verdicts"] for r in rows)
    summary = {
        "start_cpu_s": _stats([s * 1000 for s in starts]),
        "start_cpu_s_probe_runs": [round(s * 1000, 1) for s in probed],
        "start_wall_s": _stats([s * 1000 for s in start_walls]),
        "gap_cpu_ms": _stats(pooled_cpu),
        "gap_wall_ms": _stats(pooled),
        "gaps": len(pooled_cpu),
        "plans_parsed": f"{sum(r['plans_parsed'] for r in rows)}/{plans}",
        "validated": f"{sum(r['approved'] for r in rows)}/{verdicts}",
    }
    cpu, wall = summary["start_cpu_s"], summary["start_wall_s"]
    print(f"start-up to the first model request (runs without the window probe), CPU: mean "
          f"{cpu['mean']} ms, median {cpu['median']} ms over {len(starts)} runs (goal <= 800 "
          f"ms); wall: mean {wall['mean']} ms, median {wall['median']} ms; CPU of runs that "
          f"sent the probe (once per server and model a day): "
          f"{summary['start_cpu_s_probe_runs']} ms")  # fmt: skip
    gcpu, gwall = summary["gap_cpu_ms"], summary["gap_wall_ms"]
    print(f"personae between calls, CPU: mean {gcpu['mean']} ms, median {gcpu['median']} ms "
          f"over {len(pooled_cpu)} gaps (goal <= 50 ms); wall: mean {gwall['mean']} ms, "
          f"median {gwall['median']} ms")  # fmt: skip
    print(
        f"plans parsed {summary['plans_parsed']}; verdicts approving "
        f"{summary['validated']} (a verdict that did not parse counts as not approving)"
    )
    return summary


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--rounds", type=int, default=1, help="runs of each journey")
    parser.add_argument("--journeys", default=",".join(JOURNEYS),
                        help=f"comma-separated, of: {', '.join(JOURNEYS)}")  # fmt: skip
    parser.add_argument("--deadline", type=int, default=150, help="each run's deadline, s")
    parser.add_argument("--max-requests", type=int, default=8, help="each run's request cap")
    parser.add_argument("--max-output", type=int, default=160,
                        help="output tokens each request may ask for")  # fmt: skip
    parser.add_argument("--label", default="", help="suffix of the results file")
    args = parser.parse_args()
    keys = [k.strip() for k in args.journeys.split(",") if k.strip()]
    unknown = [k for k in keys if k not in JOURNEYS]
    if unknown:
        sys.exit(f"bench_real_model: unknown journey {unknown[0]!r} (known: {', '.join(JOURNEYS)})")
    why = missing()
    if why is not None:
        sys.exit(f"bench_real_model: {why}")
    load_before = _uptime()
    rows: list[dict[str, Any]] = []
    with (tempfile.TemporaryDirectory(prefix="personae-bench-home-") as home,
          tempfile.TemporaryDirectory(prefix="personae-bench-pyc-") as pyc,
          llama_server() as upstream, RecordingProxy(upstream) as proxy):  # fmt: skip
        # one data folder for the whole bench, as on a user's machine: the first run asks
        # the server its window (the overflow probe), later runs remember it
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update({"OPENAI_BASE_URL": proxy.base_url, "PERSONAE_MODEL": MODEL,
                    "PYTHONPATH": str(ROOT / "src"), "PERSONAE_HOME": home,
                    "PYTHONPYCACHEPREFIX": pyc})  # fmt: skip
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src" / "personae")],
                       env=env, check=True)  # fmt: skip
        for _ in range(args.rounds):
            rows += [_measure(key, proxy, env, args) for key in keys]
    load_after = _uptime()
    summary = _print(rows)
    print(f"load before: {load_before}\nload after:  {load_after}\n({os.cpu_count()} cores)")
    name = f"real_model-{args.label}.json" if args.label else "real_model.json"
    out = ROOT / "bench" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "summary": summary, "load_before": load_before,
                               "load_after": load_after, "cpus": os.cpu_count(),
                               "settings": vars(args)}, indent=2))  # fmt: skip
    print(f"written: {out}")


if __name__ == "__main__":
    main()
