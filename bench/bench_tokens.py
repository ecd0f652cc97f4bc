"""Benchmark: token counting throughput and newest-first conversation reads.

Run: ``PYTHONPATH=src python bench/bench_tokens.py`` (a few seconds). Prints a
table and writes ``bench/results/tokens.json``.
"""

from __future__ import annotations

import json
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _tokens_corpus import corpus  # noqa: E402
from personae.store import Store  # noqa: E402
from personae.store.conversations import ConversationStore, Message, ToolCall  # noqa: E402
from personae.tokens import counter_for_model, exact_counter  # noqa: E402
from personae.tokens.exact import load_encoding  # noqa: E402


def _median_ms(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def bench_counting(results: dict[str, object]) -> list[tuple[str, str]]:
    rows = []
    start = time.perf_counter()
    load_encoding("o200k_base")
    load_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    load_encoding("cl100k_base")
    load_cl_ms = (time.perf_counter() - start) * 1000
    rows.append(("load o200k_base (verify sha256, build)", f"{load_ms:.0f} ms"))
    rows.append(("load cl100k_base (verify sha256, build)", f"{load_cl_ms:.0f} ms"))
    text = "\n".join(corpus().values())
    size_mb = len(text.encode()) / 1e6
    counting = {}
    for label, counter in (
        ("o200k_base", exact_counter("o200k_base")),
        ("cl100k_base", exact_counter("cl100k_base")),
        ("estimate:claude", counter_for_model("claude-sonnet-4-5")),
    ):
        median, _ = _median_ms(lambda c=counter: c.count(text), 5)
        tokens = counter.count(text)
        counting[label] = {
            "ms_per_call": round(median, 2),
            "mb_per_s": round(size_mb / (median / 1000), 2),
            "tokens": tokens,
        }
        rows.append(
            (
                f"count {label} ({size_mb:.2f} MB corpus)",
                f"{median:.1f} ms, {size_mb / (median / 1000):.1f} MB/s, {tokens} tokens",
            )
        )
    results["load_ms"] = {"o200k_base": round(load_ms, 1), "cl100k_base": round(load_cl_ms, 1)}
    results["counting"] = counting
    return rows


def _history(n: int, rng: random.Random, lines: list[str]) -> list[Message]:
    out: list[Message] = []
    i = 0
    while len(out) < n:
        i += 1
        out.append(Message("user", " ".join(rng.choice(lines) for _ in range(3))))
        if rng.random() < 0.5:
            out.append(
                Message("assistant", "", [ToolCall(f"c{i}", "read_file", {"path": f"f{i}.py"})])
            )
            out.append(
                Message(
                    "tool", "\n".join(rng.choice(lines) for _ in range(8)), tool_call_id=f"c{i}"
                )
            )
        out.append(Message("assistant", " ".join(rng.choice(lines) for _ in range(4))))
    return out[:n]


def bench_store(results: dict[str, object], sizes: tuple[int, ...]) -> list[tuple[str, str]]:
    rows = []
    rng = random.Random(7)
    lines = [line for text in corpus().values() for line in text.split("\n") if line.strip()]
    counter = exact_counter("o200k_base")
    store_results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            with Store(Path(tmp) / f"bench-{size}.db") as store:
                conv = ConversationStore(store, counter)
                sid = conv.create_session(title=f"bench {size}")
                history = _history(size, rng, lines)
                # A few noise sessions so the index holds more than one session.
                noise = conv.create_session()
                conv.append_many(noise, history[:1000])
                start = time.perf_counter()
                for k in range(0, size, 2000):
                    conv.append_many(sid, history[k : k + 2000])
                fill_s = time.perf_counter() - start
                single, _ = _median_ms(
                    lambda c=conv, s=noise: c.append(s, Message("user", "one more message")),
                    50,
                )
                timings = {
                    "recent(6)": _median_ms(lambda c=conv, s=sid: c.recent(s, 6), 300),
                    "recent(50)": _median_ms(lambda c=conv, s=sid: c.recent(s, 50), 300),
                    "within_budget(800)": _median_ms(
                        lambda c=conv, s=sid: c.within_budget(s, 800), 300
                    ),
                    "within_budget(8000)": _median_ms(
                        lambda c=conv, s=sid: c.within_budget(s, 8000), 200
                    ),
                    "latest_summary": _median_ms(lambda c=conv, s=sid: c.latest_summary(s), 300),
                }
                returned = {
                    "recent(6)": 6,
                    "recent(50)": 50,
                    "within_budget(800)": len(conv.within_budget(sid, 800)),
                    "within_budget(8000)": len(conv.within_budget(sid, 8000)),
                    "latest_summary": 0,
                }
                entry: dict[str, object] = {
                    "fill_s": round(fill_s, 2),
                    "fill_msgs_per_s": round(size / fill_s),
                    "append_one_ms": round(single, 3),
                }
                rows.append(
                    (
                        f"{size:,} msgs: fill (append_many, counted once)",
                        f"{fill_s:.2f} s ({size / fill_s:,.0f} msg/s)",
                    )
                )
                rows.append((f"{size:,} msgs: append one (median)", f"{single:.3f} ms"))
                for name, (median, p95) in timings.items():
                    entry[name] = {
                        "median_ms": round(median, 4),
                        "p95_ms": round(p95, 4),
                        "messages_returned": returned[name],
                    }
                    rows.append(
                        (
                            f"{size:,} msgs: {name} -> {returned[name]} msgs",
                            f"{median:.3f} ms (p95 {p95:.3f})",
                        )
                    )
                store_results[str(size)] = entry
    results["store"] = store_results
    return rows


def main() -> None:
    results: dict[str, object] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    rows = bench_counting(results)
    rows += bench_store(results, (10_000, 100_000))
    width = max(len(name) for name, _ in rows)
    print(f"{'benchmark':<{width}}  result")
    print(f"{'-' * width}  {'-' * 40}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    out = ROOT / "bench" / "results" / "tokens.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
