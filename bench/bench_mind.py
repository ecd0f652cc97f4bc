"""Benchmark the mind server and the hook gate (prints a table, writes bench/results/mind.json).

Goals (issue 6): with 10,000 memory files, bootstrap_session p95 < 150 ms warm and
< 1.5 s cold; recall p95 < 25 ms; packet size independent of the file count;
hook gate p95 < 30 ms on a 50 MB transcript.

Run: PYTHONPATH=src python bench/bench_mind.py [--files 10000] [--transcript-mb 50]
"""

from __future__ import annotations

import argparse
import json
import os
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
from personae.mind._tokens import count_tokens, counter_name
from personae.mind.packet import packet_chars
from personae.mind.server import MindPaths, create_server
from personae.store.db import Store

TYPES = ["note", "user", "project", "feedback", "session", "reference", "decision", "person"]
_SYLLABLES = [
    "ka",
    "ri",
    "to",
    "mu",
    "se",
    "la",
    "po",
    "ne",
    "vi",
    "da",
    "chi",
    "ro",
    "ta",
    "me",
    "su",
    "ko",
    "lu",
    "ba",
    "ze",
    "ni",
]


def _vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


# Zipf-distributed words (weight 1/rank), like natural text.
WORDS = _vocabulary(random.Random(1))
WEIGHTS = [1 / (rank + 1) for rank in range(len(WORDS))]


def words(rng: random.Random, n: int) -> list[str]:
    return rng.choices(WORDS, weights=WEIGHTS, k=n)


TOOLS = ["bootstrap_session", "observe", "reflect", "recall", "get_system_prompt"]


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


CPU: dict[int, list[float]] = {}
"""CPU milliseconds of each timed() call's runs, keyed by id() of the wall list."""


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    """Wall-clock ms of ``n`` runs (CPU ms of the same runs go to CPU[id(result)])."""
    out: list[float] = []
    cpu: list[float] = []
    for _ in range(n):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        out.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    CPU[id(out)] = cpu
    return out


def summary(wall: list[float], cpu: list[float] | None = None) -> dict[str, Any]:
    cpu = CPU.get(id(wall), []) if cpu is None else cpu
    out: dict[str, Any] = {
        "p50": round(statistics.median(wall), 2),
        "p95": round(p95(wall), 2),
        "runs": len(wall),
    }
    if cpu:
        out["cpu_p95"] = round(p95(cpu), 2)
    return out


def make_memory(folder: Path, count: int, rng: random.Random) -> None:
    folder.mkdir(parents=True)
    for i in range(count):
        body = " ".join(words(rng, 80))
        title = " ".join(words(rng, 3))
        about = " and ".join(words(rng, 2))
        (folder / f"mem_{i:05d}.md").write_text(
            f"---\nname: {title}\ndescription: about {about}\ntype: {TYPES[i % len(TYPES)]}\n"
            f"project: {words(rng, 1)[0]}\n---\n{body}\n",
            encoding="utf-8",
        )
    (folder / "MEMORY.md").write_text("# Memory index\n", encoding="utf-8")


def make_transcript(path: Path, megabytes: int) -> None:
    packet = json.dumps({"schema_version": 1, "mind_contract_available": True, "x": "y" * 2000})
    boot = [
        {
            "type": "assistant",
            "message": {
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_boot",
                        "name": "mcp__personae__bootstrap_session",
                        "input": {},
                    }
                ]
            },
        },
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "tool_use_id": "toolu_boot", "content": packet}]
            },
        },
    ]
    filler_out = "x = compute(value)  # some output line\n" * 60
    with path.open("w", encoding="utf-8") as handle:
        for line in boot:
            handle.write(json.dumps(line) + "\n")
        i = 0
        while handle.tell() < megabytes * 1_000_000:
            handle.write(
                json.dumps(
                    {
                        "type": "assistant",
                        "message": {
                            "content": [
                                {
                                    "type": "tool_use",
                                    "id": f"toolu_{i}",
                                    "name": "Read",
                                    "input": {"file_path": f"/src/m{i}.py"},
                                }
                            ]
                        },
                    }
                )
                + "\n"
            )
            handle.write(
                json.dumps(
                    {
                        "type": "user",
                        "message": {
                            "content": [
                                {
                                    "type": "tool_result",
                                    "tool_use_id": f"toolu_{i}",
                                    "content": filler_out,
                                }
                            ]
                        },
                    }
                )
                + "\n"
            )
            i += 1


def gate_timings(tmp: Path, transcript_mb: int) -> dict[str, Any]:
    """The hook gate on a transcript of ``transcript_mb`` MB: uncached, as the hook runs
    (the transcript growing), and as a subprocess."""
    gate: dict[str, Any] = {}
    transcript = tmp / "t.jsonl"
    make_transcript(transcript, transcript_mb)
    gate["transcript_mb"] = round(transcript.stat().st_size / 1e6, 1)
    hook = parse_hook_input(
        json.dumps(
            {
                "session_id": "s",
                "transcript_path": str(transcript),
                "cwd": str(tmp),
                "tool_name": "Bash",
                "tool_input": {},
            }
        )
    )
    gates = compile_gates(list(DEFAULT_GATES))
    assert decide(hook, gates).allow
    # Uncached: a full backward scan of the file on every call.
    cold_gate = timed(lambda: decide(hook, gates), 10)
    gate["gate_uncached_ms"] = summary(cold_gate)
    # As the hook runs: the transcript grows by a tool call before each check (the
    # gate keeps no cache; bench_gate.py has the worst cases).
    first = timed(lambda: decide(hook, gates), 1)
    step = (
        json.dumps(
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_x",
                            "content": "ok\n" * 200,
                        }
                    ]
                },
            }
        )
        + "\n"
    )
    warm_gate: list[float] = []
    warm_gate_cpu: list[float] = []
    for _ in range(30):
        with transcript.open("a", encoding="utf-8") as handle:
            handle.write(step)
        once = timed(lambda: decide(hook, gates), 1)
        warm_gate += once
        warm_gate_cpu += CPU[id(once)]
    assert decide(hook, gates).allow
    gate["gate_first_call_ms"] = round(first[0], 2)
    gate["gate_decision_ms"] = summary(warm_gate, warm_gate_cpu)
    payload = json.dumps(
        {
            "session_id": "s",
            "transcript_path": str(transcript),
            "cwd": str(tmp),
            "tool_name": "Bash",
        }
    ).encode()
    cmd = [sys.executable, "-m", "personae", "hook", "pre-tool-use"]
    proc_times = timed(
        lambda: subprocess.run(cmd, input=payload, capture_output=True, check=True), 5
    )
    gate["gate_subprocess_ms"] = {
        "p95": round(p95(proc_times), 1),
        "runs": 5,
        "note": "includes Python start-up and `import personae`",
    }
    return gate


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

        count_tokens("warm up")  # steady state: the server loads the tokenizer after bootstrap
        cold: list[float] = []
        cold_cpu: list[float] = []
        for run in range(3):
            service = MindService(memory, tmp / "mind.md", Store(tmp / f"cold{run}.db"))
            once = timed(lambda s=service: s.bootstrap("s", TOOLS), 1)
            cold += once
            cold_cpu += CPU[id(once)]
        results["bootstrap_cold_ms"] = summary(cold, cold_cpu)

        service = MindService(memory, tmp / "mind.md", Store(tmp / "cold0.db"))
        warm = timed(lambda: service.bootstrap("s", TOOLS), 30)
        results["bootstrap_warm_ms"] = summary(warm)

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
        results["bootstrap_warm_mcp_in_memory_ms"] = {
            "p95": round(p95(mcp_times), 1),
            "runs": len(mcp_times),
        }

        queries = [" ".join(words(rng, 3)) for _ in range(100)]
        service.recall(queries[0])
        it = iter(queries)
        recall = timed(lambda: service.recall(next(it), k=5), 100)
        results["recall_ms"] = summary(recall)
        facets = iter(queries)
        faceted = timed(lambda: service.recall(next(facets), k=5, facet="type:user"), 100)
        results["recall_facet_ms"] = summary(faceted)

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

        results.update(gate_timings(tmp, transcript_mb))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--transcript-mb", type=int, default=50)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results = bench(args.files, args.transcript_mb)
    results["loadavg"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    results["cpus"] = os.cpu_count()

    def both(key: str) -> str:
        row = results[key]
        return f"{row['p95']} / {row.get('cpu_p95', '-')}"

    goals = [
        ("bootstrap cold p95 (ms)", both("bootstrap_cold_ms"), "< 1500"),
        ("bootstrap warm p95 (ms)", both("bootstrap_warm_ms"), "< 150"),
        ("bootstrap warm via MCP p95 (ms)", results["bootstrap_warm_mcp_in_memory_ms"]["p95"], "-"),
        ("recall p95 (ms)", both("recall_ms"), "< 25"),
        ("recall facet p95 (ms)", both("recall_facet_ms"), "-"),
        ("packet chars by files", results["packet_chars_by_files"], "constant"),
        (f"gate p95 on {results['transcript_mb']} MB (ms)", both("gate_decision_ms"), "< 30"),
        ("gate first call, uncached scan (ms)", results["gate_first_call_ms"], "-"),
        ("gate p95 without cache (ms)", both("gate_uncached_ms"), "-"),
        ("gate as subprocess p95 (ms)", results["gate_subprocess_ms"]["p95"], "-"),
    ]
    print(f"mind bench: {results['files']} memory files, token counter {results['token_counter']}")
    print(f"load average before/after: {results['loadavg']}; values are wall / CPU ms")
    print(f"{'metric':42} {'value':>28} {'goal':>8}")
    for name, value, goal in goals:
        shown = value if isinstance(value, str) else json.dumps(value)
        print(f"{name:42} {shown:>28} {goal:>8}")
    out = Path(__file__).parent / "results" / "mind.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
