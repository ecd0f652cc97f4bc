"""Benchmark the hook gate: decision p95 on a transcript corpus and its worst cases.

Prints a table and writes bench/results/gate.json. Goal (issue 17): the gate
decides within 1 s on any input, measured as the hook runs (a new process:
Python start-up, import, decision). In-process figures show the scan alone,
next to the alternative it replaces (parsing every transcript line as JSON).

Worst cases: a transcript with 20,000 unanswered bootstrap calls, a FIFO as
transcript_path, a NUL byte in it, a 50 MB transcript with no bootstrap at
all (a full scan that finds nothing), two million tiny lines (the scan's
deadline), and a host that never closes stdin (the gate's timer).

Run: PYTHONPATH=src python bench/bench_gate.py [--transcript-mb 50] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_mind import make_transcript, p95, summary, timed

from personae.hosts.gate import BUDGET_SECONDS, decide, parse_hook_input

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "transcripts"
RESULTS = Path(__file__).resolve().parent / "results" / "gate.json"
BOOT = "mcp__personae__bootstrap_session"


def payload(transcript: Path | str, cwd: Path, tool: str = "Bash") -> bytes:
    data = {"session_id": "bench", "transcript_path": str(transcript), "cwd": str(cwd)}
    return json.dumps(data | {"hook_event_name": "PreToolUse", "tool_name": tool}).encode()


def naive_verdict(transcript: Path) -> bool:
    """The alternative: json.loads every line forward, remember the latest bootstrap result."""
    calls: set[str] = set()
    latest = False
    with transcript.open("rb") as handle:
        for line in handle:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            for item in (entry.get("message") or {}).get("content") or []:
                if not isinstance(item, dict):
                    continue
                if item.get("type") == "tool_use" and item.get("name") == BOOT:
                    calls.add(item["id"])
                elif item.get("type") == "tool_result" and item.get("tool_use_id") in calls:
                    latest = "mind_contract_available" in json.dumps(item)
    return latest


def gate_process(stdin: bytes, *args: str) -> tuple[float, int, bytes]:
    """Wall ms, exit code and stderr of one gate run as a host runs it."""
    cmd = [sys.executable, "-m", "personae", "hook", "pre-tool-use", *args]
    start = time.perf_counter()
    done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=30, check=False)
    return (time.perf_counter() - start) * 1000, done.returncode, done.stderr


def unanswered(path: Path, count: int) -> None:
    def use(tid: str) -> str:
        item = {"type": "tool_use", "id": tid, "name": BOOT, "input": {}}
        return json.dumps(
            {"type": "assistant", "message": {"role": "assistant", "content": [item]}}
        )

    done = {
        "type": "tool_result",
        "tool_use_id": "t0",
        "content": json.dumps({"schema_version": 1, "mind_contract_available": True}),
    }
    first = [
        use("t0"),
        json.dumps({"type": "user", "message": {"role": "user", "content": [done]}}),
    ]
    path.write_text("\n".join(first + [use(f"u{i}") for i in range(count)]) + "\n")


def corpus_rows(tmp: Path, megabytes: int, runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    files = {f"{mb} MB": tmp / f"t{mb}.jsonl" for mb in sorted({1, 10, megabytes})}
    for path, mb in zip(files.values(), sorted({1, 10, megabytes}), strict=True):
        make_transcript(path, mb)
    files |= {f"corpus {p.name}": p for p in sorted(CORPUS.glob("*.jsonl"))}
    for label, path in files.items():
        hook = parse_hook_input(payload(path, tmp))
        allow = decide(hook).allow
        wall = timed(lambda hook=hook: decide(hook), runs)  # type: ignore[misc]
        row = summary(wall) | {"allow": allow, "bytes": path.stat().st_size}
        if label.endswith("MB"):
            alt = timed(lambda path=path: naive_verdict(path), max(3, runs // 5))  # type: ignore[misc]
            row["naive_json_every_line"] = summary(alt)
        out[label] = row
    return out


def process_rows(tmp: Path, runs: int) -> dict[str, Any]:
    ten = tmp / "t10.jsonl"
    out: dict[str, Any] = {}
    for label, stdin, args in (
        ("claude, 10 MB transcript", payload(ten, tmp), ()),
        ("copilot shape", json.dumps({"toolName": "bash", "cwd": str(tmp)}).encode(), ()),
        ("not gated (Read)", payload(ten, tmp, "Read"), ()),
    ):
        walls = [gate_process(stdin, *args)[0] for _ in range(runs)]
        out[label] = {"p50": round(sorted(walls)[len(walls) // 2], 1), "p95": round(p95(walls), 1)}
    return out


def worst_rows(tmp: Path) -> dict[str, Any]:
    cases: dict[str, Callable[[], tuple[float, int, bytes]]] = {}
    many = tmp / "unanswered.jsonl"
    unanswered(many, 20_000)
    cases["20,000 unanswered bootstrap calls"] = lambda: gate_process(payload(many, tmp))
    fifo = tmp / "fifo.jsonl"
    os.mkfifo(fifo)
    cases["FIFO as transcript_path"] = lambda: gate_process(payload(fifo, tmp))
    nul = json.dumps({"tool_name": "Bash", "transcript_path": "a\u0000b", "cwd": str(tmp)})
    cases["NUL byte in transcript_path"] = lambda: gate_process(nul.encode())
    empty = tmp / "nobootstrap.jsonl"
    make_transcript(empty, 50)
    text = empty.read_text(encoding="utf-8").replace(BOOT, "mcp__personae__context")
    empty.write_text(text, encoding="utf-8")
    cases["50 MB, no bootstrap (full scan)"] = lambda: gate_process(payload(empty, tmp))
    tiny = tmp / "tiny.jsonl"
    item = {"type": "tool_result", "tool_use_id": "x"}
    line = json.dumps({"type": "user", "message": {"role": "user", "content": [item]}}) + "\n"
    tiny.write_text(line * 2_000_000, encoding="utf-8")
    cases["2,000,000 tool-result lines"] = lambda: gate_process(payload(tiny, tmp))
    out: dict[str, Any] = {}
    for label, fn in cases.items():
        wall, code, err = fn()
        reason = err.decode(errors="replace").split("(", 1)[-1][:90]
        out[label] = {"ms": round(wall, 1), "exit": code, "reason": reason}
    # A host that never closes stdin: only the gate's own timer ends it.
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "personae", "hook", "pre-tool-use"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(b'{"tool_name": "Bash"')
    proc.stdin.flush()
    code = proc.wait(timeout=30)
    err = proc.stderr.read().decode(errors="replace")
    proc.stdin.close()
    out["stdin never closed"] = {
        "ms": round((time.perf_counter() - start) * 1000, 1),
        "exit": code,
        "reason": err.split("(", 1)[-1][:90],
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transcript-mb", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        results: dict[str, Any] = {
            "budget_s": BUDGET_SECONDS,
            "loadavg": [round(x, 2) for x in load],
            "cpus": os.cpu_count(),
            "in_process_ms": corpus_rows(tmp, args.transcript_mb, args.runs),
            "as_hook_process_ms": process_rows(tmp, max(5, args.runs // 2)),
            "worst_case": worst_rows(tmp),
        }
    inproc = results["in_process_ms"]
    corpus_p95 = [r["p95"] for k, r in inproc.items() if k.startswith("corpus")]
    results["corpus_p95_ms"] = round(p95(corpus_p95), 2)
    print(f"gate benchmark (load average {load[0]:.2f}, {os.cpu_count()} CPUs)")
    print(f"{'in process: decide()':<44}{'p50 ms':>9}{'p95 ms':>9}{'cpu p95':>9}  alternative p95")
    for label, row in inproc.items():
        if label.startswith("corpus"):
            continue
        alt = row.get("naive_json_every_line", {}).get("p95", "-")
        print(f"{label:<44}{row['p50']:>9}{row['p95']:>9}{row.get('cpu_p95', '-'):>9}  {alt}")
    print(
        f"{'corpus of ' + str(len(corpus_p95)) + ' transcripts (p95 of p95s)':<44}"
        f"{'':>9}{results['corpus_p95_ms']:>9}"
    )
    print(f"\n{'as the hook runs (new process)':<44}{'p50 ms':>9}{'p95 ms':>9}")
    for label, row in results["as_hook_process_ms"].items():
        print(f"{label:<44}{row['p50']:>9}{row['p95']:>9}")
    print(f"\n{'worst case (new process)':<44}{'ms':>9}{'exit':>6}  reason")
    for label, row in results["worst_case"].items():
        print(f"{label:<44}{row['ms']:>9}{row['exit']:>6}  {row['reason']}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
