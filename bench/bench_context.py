"""Context engine benchmark: assembly from big stored sessions, and randomized trims.

Run: PYTHONPATH=src python bench/bench_context.py [--trims N] [--quick]

1. Assembly (Snapshot.build + assemble for the worker role) from a real SQLite
   session of 10,000 and 100,000 stored messages (counted once at append).
   Targets: median < 5 ms at 10,000 and < 20 ms at 100,000.
2. N randomized trims (default 10,000) of tool-heavy histories: parallel tool
   calls, huge outputs, CJK, logs, JSON, running calls, random budgets. Counts
   orphan tool results, dangling tool calls, lost latest user turns, budget
   overruns by the exact count and report totals that differ from the exact
   count. All must be 0.
3. Prompt-cache prefix kept between consecutive turns of a growing session,
   eviction in batches (default) vs sliding one exchange at a time.

Prints a table and writes bench/results/context.json.
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

from personae.context import Budget, ChatMessage, Snapshot, assemble_snapshot, load_profiles
from personae.errors import BudgetExceededError
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
PROSE = "The quick brown fox reviewed the quarterly report and found three issues. "
CJK = "日本語のテキストと中文内容混合在一起。データベースの接続に失敗しました。"
LOG = "2026-11-22T10:00:01Z ERROR worker[42]: connection reset by peer (retry 3/5)\n"
JSON = '{"id":"a1b2c3d4-e5f6","items":[{"sku":"X-1","qty":3},{"sku":"Y-22","qty":14}]}\n'
CODE = "def handler(event, ctx):\n    return {'status': 200, 'body': event['q']}\n"
KINDS = [PROSE, CJK, LOG, JSON, CODE, "</recent_messages> </TASK > <task>"]


def text(rng: random.Random, size: int) -> str:
    base = KINDS[rng.randrange(len(KINDS))]
    offset = rng.randrange(len(base))
    return ((base * (size // len(base) + 2))[offset : offset + size]).strip() or "."


def stored_session(conv: ConversationStore, sid: str, n: int, rng: random.Random) -> None:
    """n messages in a tool-heavy pattern, appended in batches (each counted once)."""
    batch: list[Message] = []
    call = 0
    while len(batch) < n:
        batch.append(Message("user", text(rng, rng.randint(20, 200))))
        for _ in range(rng.randint(0, 2)):
            ids = [f"c{call + i}" for i in range(rng.randint(1, 3))]
            call += len(ids)
            calls = [{"id": i, "name": "read_file", "args": {"path": f"src/{i}.py"}} for i in ids]
            batch.append(Message("assistant", text(rng, 60), tool_calls=calls))
            batch.extend(
                Message("tool", text(rng, rng.choice([40, 200, 1500])), tool_call_id=i) for i in ids
            )
        batch.append(Message("assistant", text(rng, rng.randint(40, 300))))
    # drop a partial last exchange so the store's pairing check holds
    while batch[-1].role != "assistant" or batch[-1].tool_calls:
        batch.pop()
    for start in range(0, len(batch), 5000):
        conv.append_many(sid, batch[start : start + 5000])


def bench_assembly(n: int, runs: int, rng: random.Random) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".personae").mkdir()
        (root / ".personae" / "directive.md").write_text(
            "# Directive\n" + PROSE * 20, encoding="utf-8"
        )
        store = Store(root / ".personae" / "state.db")
        conv = ConversationStore(store, COUNTER)
        sid = conv.create_session()
        t0 = time.perf_counter()
        stored_session(conv, sid, n, rng)
        stored_s = time.perf_counter() - t0
        count = conv.count(sid)
        budget = Budget.of_window(128_000)
        build_ms, assemble_ms, total_ms, cpu_ms = [], [], [], []
        for i in range(runs + 5):  # the first 5 warm the memo and the tokenizer
            c0 = time.process_time()
            t0 = time.perf_counter()
            snap = Snapshot.build(
                root,
                conversations=conv,
                session=sid,
                counter=COUNTER,
                task="Fix the failing test",
                execution_block="You are the builder persona.",
                include_git_log=False,
            )
            t1 = time.perf_counter()
            ctx = assemble_snapshot(snap, "worker", budget, COUNTER)
            t2 = time.perf_counter()
            c2 = time.process_time()
            if i >= 5:
                cpu_ms.append((c2 - c0) * 1000)
                build_ms.append((t1 - t0) * 1000)
                assemble_ms.append((t2 - t1) * 1000)
                total_ms.append((t2 - t0) * 1000)
        assert COUNTER.count(ctx.render()) == ctx.report().total <= budget.tokens
        store.close()
    return {
        "messages": count,
        "store_seconds": round(stored_s, 2),
        "runs": runs,
        "build_median_ms": round(statistics.median(build_ms), 3),
        "assemble_median_ms": round(statistics.median(assemble_ms), 3),
        "median_ms": round(statistics.median(total_ms), 3),
        "p95_ms": round(sorted(total_ms)[int(0.95 * (runs - 1))], 3),
        "cpu_median_ms": round(statistics.median(cpu_ms), 3),
        "rendered_tokens": ctx.total,
        "messages_rule": next(r.rule for r in ctx.report().sections if r.tag == "recent_messages"),
    }


class Pool:
    """Message texts drawn from a fixed pool, each counted once (as the store does at append)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.texts: dict[int, list[str]] = {}
        self.counts: dict[str, int] = {}
        for size in (5, 10, 20, 40, 50, 200, 300, 900, 2000, 8000, 30000):
            self.texts[size] = [text(rng, size) for _ in range(8)]
            for t in self.texts[size]:
                self.counts[t] = COUNTER.count(t)

    def __call__(self, size: int) -> str:
        return self.rng.choice(self.texts[size])


def random_history(rng: random.Random, pool: Pool) -> list[ChatMessage]:
    msgs: list[ChatMessage] = []
    call = 0

    def add(role: str, content: str, **kw: Any) -> None:
        tokens = pool.counts.get(content) if not kw.get("tool_calls") else None
        msgs.append(
            ChatMessage(
                role=role,
                content=content,
                seq=len(msgs) + 1,  # type: ignore[arg-type]
                tokens=tokens,
                counter=COUNTER.name,
                **kw,
            )
        )

    turns = rng.randint(1, 8)
    for t in range(turns):
        add("user", f"turn {t}: " + pool(rng.choice([5, 50, 300])))
        for _ in range(rng.choice([0, 1, 1, 2, 3, 5])):
            calls = []
            for _ in range(rng.choice([1, 1, 2, 3, 6])):
                call += 1
                from personae.context import ChatToolCall

                calls.append(
                    ChatToolCall(
                        id=f"call_{call}",
                        name=rng.choice(["read_file", "grep", "shell"]),
                        arguments=json.dumps({"path": f"f{call}"}),
                    )
                )
            add("assistant", pool(rng.choice([10, 40, 200])), tool_calls=tuple(calls))
            running = t == turns - 1 and rng.random() < 0.15
            for c in calls[: len(calls) // 2] if running else calls:
                size = rng.choice([0, 10, 300, 2000, 8000, 30000])
                add("tool", pool(size) if size else "", tool_call_id=c.id)
        if rng.random() < 0.6:
            add("assistant", pool(rng.choice([20, 200, 900])))
    return msgs


def check(kept: tuple[ChatMessage, ...]) -> tuple[int, int]:
    orphans = dangling = 0
    i = 0
    while i < len(kept):
        m = kept[i]
        if m.role == "tool":
            orphans += 1
            i += 1
            continue
        if m.role == "assistant" and m.tool_calls:
            ids = {c.id for c in m.tool_calls}
            j, got = i + 1, set()
            while j < len(kept) and kept[j].role == "tool":
                if kept[j].tool_call_id in ids:
                    got.add(kept[j].tool_call_id)
                else:
                    orphans += 1
                j += 1
            dangling += len(ids - got)
            i = j
        else:
            i += 1
    return orphans, dangling


def bench_trims(n: int, rng: random.Random, root: Path) -> dict[str, Any]:
    pool = Pool(rng)
    stats = dict(
        orphans=0,
        dangling=0,
        lost_latest=0,
        overruns=0,
        report_mismatch=0,
        refused_pinned=0,
        nondeterministic=0,
        shrunk_latest=0,
        evicted=0,
    )
    times = []
    profiles = load_profiles(None)
    for k in range(n):
        history = random_history(rng, pool)
        budget = rng.choice([150, 300, 600, 1000, 2000, 4000, 8000])
        role = rng.choice(["worker", "client", "manager"])
        snap = Snapshot.build(
            root,
            messages=history,
            task="Fix the bug in the parser </task>",
            execution_block="You are careful.",
            validation_context="Tests must pass.",
            include_git_log=False,
            profiles=profiles,
        )
        t0 = time.perf_counter()
        try:
            ctx = assemble_snapshot(snap, role, Budget.absolute(budget), COUNTER)
        except BudgetExceededError:
            stats["refused_pinned"] += 1
            continue
        times.append((time.perf_counter() - t0) * 1000)
        rendered = ctx.render()
        exact = COUNTER.count(rendered)
        stats["overruns"] += exact > budget
        stats["report_mismatch"] += ctx.report().total != exact
        o, d = check(ctx.messages)
        stats["orphans"] += o
        stats["dangling"] += d
        latest = max(m.seq for m in history if m.role == "user")
        stats["lost_latest"] += not any(m.seq == latest for m in ctx.messages)
        rule = next(r.rule for r in ctx.report().sections if r.tag == "recent_messages")
        stats["shrunk_latest"] += "shrunk" in rule
        stats["evicted"] += "evicted" in rule
        if k % 50 == 0:
            again = assemble_snapshot(snap, role, Budget.absolute(budget), COUNTER).render()
            stats["nondeterministic"] += again != rendered
    return {
        "trims": n,
        **stats,
        "median_ms": round(statistics.median(times), 3),
        "p95_ms": round(sorted(times)[int(0.95 * (len(times) - 1))], 3),
    }


def bench_prefix(root: Path, turns: int) -> dict[str, float]:
    """Share of the previous prompt reused as an identical prefix (mean over a growing session)."""
    out = {}
    sliding_dir = root / "sliding"
    (sliding_dir / ".personae").mkdir(parents=True, exist_ok=True)
    (sliding_dir / ".personae" / "profiles.yaml").write_text(
        "sections:\n  recent_messages: {evict_batch: 1, max_messages: 24, cap: 4000}\n",
        encoding="utf-8",
    )
    batched_dir = root / "batched"
    (batched_dir / ".personae").mkdir(parents=True, exist_ok=True)
    (batched_dir / ".personae" / "profiles.yaml").write_text(
        "sections:\n  recent_messages: {max_messages: 24, cap: 4000}\n", encoding="utf-8"
    )
    rng = random.Random(7)
    for name, folder in (("batched", batched_dir), ("sliding", sliding_dir)):
        profiles = load_profiles(folder)
        history: list[ChatMessage] = []
        ratios = []
        prev = None
        for t in range(turns):
            history.append(ChatMessage("user", f"q{t} " + text(rng, 80), seq=len(history) + 1))
            history.append(
                ChatMessage("assistant", f"a{t} " + text(rng, 200), seq=len(history) + 1)
            )
            snap = Snapshot.build(
                folder,
                messages=history,
                task="t",
                execution_block="persona",
                include_git_log=False,
                profiles=profiles,
            )
            cur = assemble_snapshot(snap, "worker", Budget.absolute(20_000), COUNTER).render()
            if prev is not None:
                common = 0
                for a, b in zip(prev, cur, strict=False):
                    if a != b:
                        break
                    common += 1
                ratios.append(common / len(prev))
            prev = cur
        out[name] = round(statistics.mean(ratios[10:]), 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trims", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    rng = random.Random(2026)
    sizes = [(1_000, 20)] if args.quick else [(10_000, 200), (100_000, 200)]
    results: dict[str, Any] = {
        "counter": COUNTER.name,
        "assembly": [],
        "python": sys.version.split()[0],
    }
    for n, runs in sizes:
        results["assembly"].append(bench_assembly(n, runs, rng))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        results["trims"] = bench_trims(200 if args.quick else args.trims, rng, Path(tmp))
        results["trims"]["seconds"] = round(time.perf_counter() - t0, 1)
        results["cache_prefix"] = bench_prefix(Path(tmp), 30 if args.quick else 80)
    targets = {10_000: 5.0, 100_000: 20.0}
    print("Assembly from a stored session (Snapshot.build + assemble, worker, 30% of 128k);")
    print("median/p95 are wall clock, cpu is this process's CPU time (the machine is shared):")
    print(
        f"  {'messages':>9} {'median ms':>10} {'p95 ms':>8} {'cpu ms':>7} {'build ms':>9}"
        f" {'assemble ms':>12} {'target':>7}"
    )
    for row in results["assembly"]:
        target = targets.get(row["messages"] // 1000 * 1000)
        mark = (
            ""
            if target is None
            else f"< {target:g}" + (" ok" if row["median_ms"] < target else " MISSED")
        )
        print(
            f"  {row['messages']:>9,} {row['median_ms']:>10.3f} {row['p95_ms']:>8.3f} "
            f"{row['cpu_median_ms']:>7.3f} "
            f"{row['build_median_ms']:>9.3f} {row['assemble_median_ms']:>12.3f} {mark:>7}"
            f"  (recent messages: {row['messages_rule']})"
        )
    tr = results["trims"]
    print(
        f"\nRandomized trims: {tr['trims']:,} tool-heavy histories in {tr['seconds']} s "
        f"(median {tr['median_ms']} ms, p95 {tr['p95_ms']} ms)"
    )
    for key in (
        "orphans",
        "dangling",
        "lost_latest",
        "overruns",
        "report_mismatch",
        "nondeterministic",
    ):
        print(f"  {key:<18} {tr[key]:>7}   (must be 0)")
    for key in ("refused_pinned", "shrunk_latest", "evicted"):
        print(f"  {key:<18} {tr[key]:>7}")
    cp = results["cache_prefix"]
    print(
        f"\nPrompt prefix reused turn to turn: batched eviction {cp['batched']:.1%}, "
        f"sliding {cp['sliding']:.1%}"
    )
    out = Path(__file__).resolve().parent / "results" / "context.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    bad = sum(
        tr[k]
        for k in (
            "orphans",
            "dangling",
            "lost_latest",
            "overruns",
            "report_mismatch",
            "nondeterministic",
        )
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
