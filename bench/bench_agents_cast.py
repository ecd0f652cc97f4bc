"""A 165-persona cast in the OpenAI Agents SDK: build, print, and a run with a handoff.

Run: .venv/bin/python bench/bench_agents_cast.py [--runs N]

The cast: a router that may spawn 120 specialists, a reviewer that may spawn 40,
and 163 specialists, every fourth of which may spawn the reviewer and the next
specialist (handoff cycles, as in public collections whose agents call each
other). Timed, CPU (``time.process_time``) next to wall:

- ``load``: ``Cast.load`` of the 165 persona files;
- ``build``: ``cast_agents`` (handoffs by spawn rights, tools narrowed);
- ``print``: ``repr`` of all 165 agents (the SDK prints an agent as a dataclass,
  every handoff in full: on such a cast that grows with every agent reached;
  personae's agents print handoffs by name), with the characters printed;
- ``run``: ``Runner.run(router, ...)``: the router hands off to a specialist,
  which answers (two requests to the scripted replay server on 127.0.0.1, in
  this process: its time is included).

Prints a table and writes bench/results/agents_cast.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from agents import OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from openai import AsyncOpenAI

    from personae.integrations.openai_agents import cast_agents
except ImportError:  # pragma: no cover - an optional extra
    sys.exit("bench_agents_cast needs the openai-agents extra: pip install -e '.[openai-agents]'")

from personae.models import Scenario, ScriptedServer
from personae.persona import Cast

ROOT = Path(__file__).resolve().parents[1]


def write_cast(root: Path) -> None:
    """The 165 persona files (see the module docstring)."""
    folder = root / ".claude" / "agents"
    folder.mkdir(parents=True)
    specialists = [f"s{i:03}" for i in range(163)]
    head = "---\nname: {}\ndescription: {}.\ntools: {}\n---\nYou are {}.\n"
    router = f"Read, Agent({', '.join(specialists[:120])})"
    (folder / "router.md").write_text(head.format("router", "Routes", router, "the router"))
    reviewer = f"Read, Agent({', '.join(specialists[:40])})"
    (folder / "reviewer.md").write_text(head.format("reviewer", "Reviews", reviewer, "reviewer"))
    for i, name in enumerate(specialists):
        tools = "Read, Grep" if i % 4 else f"Read, Agent(reviewer, {specialists[(i + 1) % 163]})"
        (folder / f"{name}.md").write_text(head.format(name, f"Specialist {i}", tools, name))


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, (time.process_time() - c0) * 1000, (time.perf_counter() - w0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="timed repetitions of each step")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "agents_cast.json")
    args = ap.parse_args()
    set_tracing_disabled(True)
    steps = [
        {"tool_calls": [{"name": "transfer_to_s005", "args": {}}]},
        {"text": "Fixed."},
    ] * args.runs
    rows: dict[str, list[tuple[float, float]]] = {"load": [], "build": [], "print": [], "run": []}
    printed = 0
    load_before = os.getloadavg()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedServer(Scenario.model_validate({"steps": steps})) as server,
    ):
        write_cast(Path(tmp))
        client = AsyncOpenAI(base_url=server.base_url, api_key="scripted")
        model = OpenAIChatCompletionsModel(model=server.model_name, openai_client=client)
        for _ in range(args.runs):
            cast, cpu, wall = timed(lambda: Cast.load(Path(tmp)))
            rows["load"].append((cpu, wall))
            agents, cpu, wall = timed(lambda cast=cast: cast_agents(cast, model))
            rows["build"].append((cpu, wall))
            texts, cpu, wall = timed(lambda agents=agents: [repr(a) for a in agents.values()])
            rows["print"].append((cpu, wall))
            printed = sum(map(len, texts))
            result, cpu, wall = timed(
                lambda agents=agents: asyncio.run(
                    Runner.run(agents["router"], "Fix the flaky test")
                )
            )
            assert result.last_agent.name == "s005" and result.final_output == "Fixed."
            rows["run"].append((cpu, wall))
    load_after = os.getloadavg()
    summary = {
        step: {
            "cpu_median_ms": round(statistics.median(c for c, _ in got), 2),
            "wall_median_ms": round(statistics.median(w for _, w in got), 2),
        }
        for step, got in rows.items()
    }
    total_cpu = sum(s["cpu_median_ms"] for s in summary.values())
    total_wall = sum(s["wall_median_ms"] for s in summary.values())
    print(
        f"load average {load_before[0]:.2f} (after {load_after[0]:.2f}); {args.runs} runs, medians"
    )
    print(f"165 personas, router hands off to 120; {printed:,} characters printed for all agents")
    print(f"{'step':<8}{'cpu ms':>10}{'wall ms':>10}")
    for step, s in summary.items():
        print(f"{step:<8}{s['cpu_median_ms']:>10.1f}{s['wall_median_ms']:>10.1f}")
    print(f"{'total':<8}{total_cpu:>10.1f}{total_wall:>10.1f}")
    out = {
        "load_average": load_before, "load_average_after": load_after, "runs": args.runs,
        "personas": 165, "printed_characters": printed, "steps": summary,
        "total_cpu_ms": round(total_cpu, 2), "total_wall_ms": round(total_wall, 2),
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
