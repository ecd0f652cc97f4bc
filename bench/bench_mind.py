"""Benchmark the mind server and the hook gate (prints a table, writes bench/results/mind.json).

Goals (issue 6): with 10,000 memory files, bootstrap_session p95 < 150 ms warm and
< 1.5 s cold; recall p95 < 25 ms; packet size independent of the file count;
hook gate p95 < 30 ms on a 50 MB transcript.

Run: PYTHONPATH=src python bench/bench_mind.py [--files 10000] [--transcript-mb 50]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from personae.hosts.gate import DEFAULT_GATES, compile_gates, decide, parse_hook_input
from personae.mind import MindService
from personae.mind._tokens import counter_name
from personae.mind.packet import packet_chars
from personae.mind.server import MindPaths, create_server
from personae.store.db import Store

TYPES = ["note", "user", "project", "feedback", "session", "reference", "decision", "person"]
WORDS = (
    "portal deploy release gate memory recall journal persona contract budget token context "
    "handover retry validator manager worker sqlite index cache schema packet host hook "
    "transcript bootstrap session voice rule feedback user project tea coffee launch review "
    "merge branch commit test bench latency queue worker cluster model prompt summary"
).split()
TOOLS = ["bootstrap_session", "observe", "reflect", "recall", "get_system_prompt"]


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def make_memory(folder: Path, count: int, rng: random.Random) -> None:
    folder.mkdir(parents=True)
    for i in range(count):
        words = " ".join(rng.choice(WORDS) for _ in range(60))
        title = " ".join(rng.choice(WORDS) for _ in range(3))
        (folder / f"mem_{i:05d}.md").write_text(
            f"---\nname: {title}\ndescription: about {rng.choice(WORDS)} and "
            f"{rng.choice(WORDS)}\ntype: {TYPES[i % len(TYPES)]}\nproject: {rng.choice(WORDS)}\n"
            f"---\n{words}\n",
            encoding="utf-8",
        )
    (folder / "MEMORY.md").write_text("# Memory index\n", encoding="utf-8")


def make_transcript(path: Path, megabytes: int) -> None:
    packet = json.dumps({"schema_version": 1, "mind_contract_available": True, "x": "y" * 2000})
    boot = [
        {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "toolu_boot", "name": "mcp__personae__bootstrap_session",
             "input": {}}]}},
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_boot", "content": packet}]}},
    ]
    filler_out = "x = compute(value)  # some output line\n" * 60
    with path.open("w", encoding="utf-8") as handle:
        for line in boot:
            handle.write(json.dumps(line) + "\n")
        i = 0
        while handle.tell() < megabytes * 1_000_000:
            handle.write(json.dumps({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": f"toolu_{i}", "name": "Read",
                 "input": {"file_path": f"/src/m{i}.py"}}]}}) + "\n")
            handle.write(json.dumps({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": filler_out}]}})
                + "\n")
            i += 1


def bench(files: int, transcript_mb: int) -> dict[str, Any]:
    rng = random.Random(7)
    results: dict[str, Any] = {"files": files, "token_counter": counter_name()}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "mind.md").write_text("You are the persona.\n" * 50, encoding="utf-8")
        memory = tmp / "memory"
        t0 = time.perf_counter()
        make_memory(memory, files, rng)
        results["generate_files_s"] = round(time.perf_counter() - t0, 2)

        cold = []
        for run in range(3):
            service = MindService(memory, tmp / "mind.md", Store(tmp / f"cold{run}.db"))
            cold += timed(lambda s=service: s.bootstrap("s", TOOLS), 1)
        results["bootstrap_cold_ms"] = {"p95": round(p95(cold), 1), "runs": len(cold)}

        service = MindService(memory, tmp / "mind.md", Store(tmp / "cold0.db"))
        warm = timed(lambda: service.bootstrap("s", TOOLS), 30)
        results["bootstrap_warm_ms"] = {"p50": round(statistics.median(warm), 1),
                                         "p95": round(p95(warm), 1), "runs": len(warm)}

        server, _ = create_server(
            MindPaths(memory_dir=memory, prompt=tmp / "mind.md", store=tmp / "cold0.db")
        )
        mcp_times: list[float] = []

        async def over_mcp() -> None:
            async with Client(server) as client:
                for _ in range(20):
                    start = time.perf_counter()
                    result = await client.call_tool("bootstrap_session", {"session_id": "s"})
                    mcp_times.append((time.perf_counter() - start) * 1000)
                    assert result.structured_content is not None

        anyio.run(over_mcp)
        results["bootstrap_warm_mcp_in_memory_ms"] = {"p95": round(p95(mcp_times), 1),
                                                      "runs": len(mcp_times)}

        queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(100)]
        service.recall(queries[0])
        it = iter(queries)
        recall = timed(lambda: service.recall(next(it), k=5), 100)
        results["recall_ms"] = {"p50": round(statistics.median(recall), 2),
                                "p95": round(p95(recall), 2), "runs": len(recall)}
        facets = iter(queries)
        faceted = timed(lambda: service.recall(next(facets), k=5, facet="type:user"), 100)
        results["recall_facet_ms"] = {"p95": round(p95(faceted), 2), "runs": len(faceted)}

        sizes = {}
        for count in (10, 1_000, files):
            folder = tmp / f"size{count}"
            if count == files:
                folder = memory
            else:
                make_memory(folder, count, rng)
            svc = MindService(folder, tmp / "mind.md", Store(tmp / f"size{count}.db"))
            sizes[str(count)] = packet_chars(svc.bootstrap("s", TOOLS))
        results["packet_chars_by_files"] = sizes

        transcript = tmp / "t.jsonl"
        make_transcript(transcript, transcript_mb)
        results["transcript_mb"] = round(transcript.stat().st_size / 1e6, 1)
        hook = parse_hook_input(json.dumps({
            "session_id": "s", "transcript_path": str(transcript), "cwd": str(tmp),
            "tool_name": "Bash", "tool_input": {},
        }))
        gates = compile_gates(list(DEFAULT_GATES))
        assert decide(hook, gates).allow
        gate = timed(lambda: decide(hook, gates), 30)
        results["gate_decision_ms"] = {"p50": round(statistics.median(gate), 2),
                                       "p95": round(p95(gate), 2), "runs": len(gate)}
        payload = json.dumps({"session_id": "s", "transcript_path": str(transcript),
                              "cwd": str(tmp), "tool_name": "Bash"}).encode()
        cmd = [sys.executable, "-m", "personae", "hook", "pre-tool-use"]
        proc_times = timed(
            lambda: subprocess.run(cmd, input=payload, capture_output=True, check=True), 5
        )
        results["gate_subprocess_ms"] = {"p95": round(p95(proc_times), 1), "runs": 5,
                                         "note": "includes Python start-up and `import personae`"}
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--transcript-mb", type=int, default=50)
    args = parser.parse_args()
    results = bench(args.files, args.transcript_mb)
    goals = [
        ("bootstrap cold p95 (ms)", results["bootstrap_cold_ms"]["p95"], "< 1500"),
        ("bootstrap warm p95 (ms)", results["bootstrap_warm_ms"]["p95"], "< 150"),
        ("bootstrap warm via MCP p95 (ms)", results["bootstrap_warm_mcp_in_memory_ms"]["p95"], "-"),
        ("recall p95 (ms)", results["recall_ms"]["p95"], "< 25"),
        ("recall facet p95 (ms)", results["recall_facet_ms"]["p95"], "-"),
        ("packet chars by files", results["packet_chars_by_files"], "constant"),
        (f"gate p95 on {results['transcript_mb']} MB (ms)", results["gate_decision_ms"]["p95"],
         "< 30"),
        ("gate as subprocess p95 (ms)", results["gate_subprocess_ms"]["p95"], "-"),
    ]
    print(f"mind bench: {results['files']} memory files, token counter {results['token_counter']}")
    print(f"{'metric':42} {'value':>28} {'goal':>8}")
    for name, value, goal in goals:
        print(f"{name:42} {json.dumps(value):>28} {goal:>8}")
    out = Path(__file__).parent / "results" / "mind.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
