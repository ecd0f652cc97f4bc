"""How much of the budget the fitter leaves unused when the input does not fit.

Run: .venv/bin/python bench/bench_context_waste.py [--budgets N] [--out FILE]

Inputs, each assembled from scratch at N random budgets below what it needs
whole (from 500 tokens; budgets below what the pinned sections need are left
out):

1. the sized project of the tests (6.5 KB STEP.md, 11 KB codebase notes, a
   research folder with summaries, reference docs, 40 commits): every profile
   that needs more than 500 tokens;
2. the same project with every project file ten times larger;
3. tool-heavy agent histories (parallel calls, logs, CJK, JSON, huge tool
   outputs) of 100, 1,000 and 10,000 messages, budgets 500-20,000, under a
   profile whose only limit is the budget, and under the built-in worker,
   manager and client profiles.

For each: mean, 90th percentile and worst unused share of the budget, overruns
by the exact count (must be 0) and CPU per assembly. Prints a table and writes
JSON to bench/results/context_waste.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_vs_langchain import PROFILE, history  # noqa: E402

from _project_files import sized_project  # noqa: E402
from personae.context import Budget, Snapshot, assemble_snapshot, load_profiles  # noqa: E402
from personae.errors import BudgetExceededError  # noqa: E402
from personae.tokens.exact import exact_counter  # noqa: E402

COUNTER = exact_counter("o200k_base")


def measure(snap: Snapshot, role: str, budgets: list[int]) -> dict[str, Any]:
    """Unused share of each budget (only budgets below what ``role`` needs whole)."""
    need = assemble_snapshot(snap, role, Budget.absolute(10_000_000), COUNTER).total
    unused, overruns = [], 0
    cpu = time.process_time()
    for b in (b for b in budgets if b < need):
        try:
            ctx = assemble_snapshot(snap, role, Budget.absolute(b), COUNTER)
        except BudgetExceededError:  # below what the pinned sections need: not a fit
            continue
        exact = COUNTER.count(ctx.render())
        overruns += exact > b
        unused.append((b - exact) / b)
    cpu = time.process_time() - cpu
    if not unused:
        return {"need": need, "budgets": 0}
    unused.sort()
    return {
        "need": need,
        "budgets": len(unused),
        "mean_unused": statistics.mean(unused),
        "p90_unused": unused[int(0.9 * (len(unused) - 1))],
        "max_unused": unused[-1],
        "overruns": overruns,
        "cpu_ms_per_assembly": 1000 * cpu / len(unused),
    }


def _larger(project: Path, times: int) -> Path:
    """Every project file ``times`` as long (parts renumbered so headings stay distinct)."""
    for path in (project / ".personae" / "project").rglob("*.md"):
        if path.name in ("STATE.md",):
            continue
        text = path.read_text(encoding="utf-8")
        path.write_text(
            text + "".join(text.replace("## ", f"## ({k}) ") for k in range(1, times)),
            encoding="utf-8",
        )
    return project


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budgets", type=int, default=40, help="random budgets per row")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "context_waste.json")
    args = ap.parse_args()
    rng = random.Random(15)
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, times in (("project", 1), ("project x10", 10)):
            project = _larger(sized_project(Path(tmp) / name), times)
            snap = Snapshot.build(project, task="profile-page")
            for role in load_profiles(project).roles:
                need = assemble_snapshot(snap, role, Budget.absolute(10**7), COUNTER).total
                if need > 500:
                    budgets = [rng.randint(500, need - 1) for _ in range(args.budgets)]
                    rows[f"{name} / {role}"] = measure(snap, role, budgets)
        agent_root = Path(tmp) / "a"
        (agent_root / ".personae").mkdir(parents=True)
        (agent_root / ".personae" / "profiles.yaml").write_text(PROFILE, encoding="utf-8")
        for n in (100, 1_000, 10_000):
            msgs = history(n, random.Random(n))
            snap = Snapshot.build(agent_root, messages=msgs, task="Fix the bug",
                                  include_git_log=False)  # fmt: skip
            budgets = [rng.randint(500, 20_000) for _ in range(args.budgets)]
            for role in ("agent", "worker", "manager", "client"):
                rows[f"history {n:,} / {role}"] = measure(snap, role, budgets)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} (CPU time per assembly; the machine is shared)")
    print(f"{'input / role':<34}{'need':>9}{'n':>4}{'mean':>8}{'p90':>8}{'max':>8}"
          f"{'overrun':>8}{'cpu ms':>9}")  # fmt: skip
    for name, r in rows.items():
        if not r["budgets"]:
            continue
        print(
            f"{name:<34}{r['need']:>9,}{r['budgets']:>4}{r['mean_unused']:>8.1%}"
            f"{r['p90_unused']:>8.1%}{r['max_unused']:>8.1%}{r['overruns']:>8}"
            f"{r['cpu_ms_per_assembly']:>9.2f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = {"load_average": load, "rows": rows}
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
