"""How much of the budget the fitter leaves unused when the input does not fit.

Run: .venv/bin/python bench/bench_context_waste.py [--budgets N] [--out FILE]

Two inputs, each assembled at N random budgets below what it needs whole:

1. the sized project of the tests (6.5 KB STEP.md, 11 KB codebase notes, a
   research folder with summaries, reference docs, 40 commits), builder role;
2. a tool-heavy agent history (80 turns, parallel calls, logs, CJK, JSON)
   under a profile whose only limit is the budget.

For each: median and 90th percentile of unused budget, sections dropped,
overruns by the exact count (must be 0). Prints a table and writes JSON to
bench/results/context_waste.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _project_files import PROSE, sized_project  # noqa: E402
from personae.context import Budget, Snapshot, assemble_snapshot  # noqa: E402
from personae.tokens.exact import exact_counter  # noqa: E402

COUNTER = exact_counter("o200k_base")
KINDS = [
    PROSE,
    "2026-11-22T10:00:01Z ERROR worker[42]: connection reset by peer (retry 3/5)\n",
    "日本語のテキストと中文内容混合在一起。",
    '{"id":"a1b2c3d4","items":[{"sku":"X-1","qty":3}]}\n',
]


def history(rng: random.Random) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []

    def add(**m: Any) -> None:
        msgs.append({"seq": len(msgs) + 1, **m})

    for t in range(80):
        add(role="user", content=f"q{t} " + PROSE)
        calls = [{"id": f"c{t}_{k}", "name": "read_file", "args": {"p": k}} for k in range(2)]
        add(role="assistant", content="", tool_calls=calls)
        for c in calls:
            base = KINDS[rng.randrange(len(KINDS))]
            size = rng.choice([50, 400, 2000])
            add(role="tool", tool_call_id=c["id"], content=(base * (size // len(base) + 1))[:size])
        add(role="assistant", content=f"a{t} " + PROSE)
    return msgs


def measure(snap: Snapshot, role: str, low: int, rng: random.Random, n: int) -> dict[str, Any]:
    need = assemble_snapshot(snap, role, Budget.absolute(10_000_000), COUNTER).total
    unused, dropped, overruns = [], 0, 0
    cpu = time.process_time()
    for _ in range(n):
        b = rng.randint(low, need - 1)
        ctx = assemble_snapshot(snap, role, Budget.absolute(b), COUNTER)
        exact = COUNTER.count(ctx.render())
        overruns += exact > b
        unused.append((b - exact) / b)
        dropped += sum(
            1 for s in ctx.report().sections if "dropped" in s.rule or s.rule == "removed"
        )
    cpu = time.process_time() - cpu
    unused.sort()
    return {
        "need": need,
        "budgets": n,
        "median_unused": statistics.median(unused),
        "p90_unused": unused[int(0.9 * (n - 1))],
        "max_unused": unused[-1],
        "sections_dropped": dropped,
        "overruns": overruns,
        "cpu_ms_per_assembly": 1000 * cpu / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budgets", type=int, default=300)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "context_waste.json")
    args = ap.parse_args()
    rng = random.Random(15)
    with tempfile.TemporaryDirectory() as tmp:
        project = sized_project(Path(tmp) / "p")
        snap = Snapshot.build(project, task="profile-page")
        seed = measure(snap, "builder", 600, rng, args.budgets)
        agent_root = Path(tmp) / "a"
        (agent_root / ".personae").mkdir(parents=True)
        (agent_root / ".personae" / "profiles.yaml").write_text(
            "roles:\n  agent:\n    sections:\n      - task\n"
            "      - {tag: recent_messages, cap: 1000000, max_messages: 100000}\n",
            encoding="utf-8",
        )
        hsnap = Snapshot.build(
            agent_root, messages=history(rng), task="go on", include_git_log=False
        )
        agent = measure(hsnap, "agent", 2000, rng, args.budgets)
    rows = {"sized project (builder)": seed, "agent history (80 turns)": agent}
    print(
        f"{'input':<28}{'need':>8}{'median':>9}{'p90':>8}{'max':>8}{'dropped':>9}"
        f"{'overruns':>10}{'cpu ms':>9}"
    )
    for name, r in rows.items():
        print(
            f"{name:<28}{r['need']:>8,}{r['median_unused']:>9.1%}{r['p90_unused']:>8.1%}"
            f"{r['max_unused']:>8.1%}{r['sections_dropped']:>9}{r['overruns']:>10}"
            f"{r['cpu_ms_per_assembly']:>9.2f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
