"""The framework drop-in's fit uses its budget, by the caller's own count, and never
makes a shortened output longer than the original."""

from __future__ import annotations

import random
import statistics
from typing import Any

import pytest

from personae import fit_messages
from personae.tokens import exact_counter

COUNTER = exact_counter()
KINDS = [
    "The service listens on port 8080 and reads its config from the environment. ",
    "2026-11-22T10:00:01Z ERROR worker[42]: connection reset by peer (retry 3/5)\n",
    "日本語のテキストと中文内容混合在一起。",
    '{"id":"a1b2c3d4","items":[{"sku":"X-1","qty":3}]}\n',
]


def _text(rng: random.Random, size: int) -> str:
    base = rng.choice(KINDS)
    return (base * (size // len(base) + 1))[:size]


def history(seed: int, turns: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are the builder."}]
    for t in range(turns):
        out.append({"role": "user", "content": f"turn {t}: " + _text(rng, 200)})
        for s in range(rng.randint(0, 2)):
            ids = [f"c{t}-{s}-{k}" for k in range(rng.randint(1, 3))]
            out.append({"role": "assistant", "content": _text(rng, 60), "tool_calls": [
                {"id": i, "type": "function",
                 "function": {"name": "read_file", "arguments": '{"path": "x"}'}}
                for i in ids
            ]})  # fmt: skip
            out += [
                {"role": "tool", "tool_call_id": i,
                 "content": _text(rng, rng.choice([60, 400, 1500, 8000, 30000]))}
                for i in ids
            ]  # fmt: skip
        out.append({"role": "assistant", "content": _text(rng, rng.choice([60, 400]))})
    return out


def _chars_over_four(items: list[Any]) -> int:
    """A caller's own rough count (not our tokenizer)."""
    return sum(4 + len(m.get("content") or "") // 4 for m in items)


@pytest.mark.parametrize("turns", [3, 30])
def test_budget_used_and_shortened_outputs_smaller(turns: int) -> None:
    rng = random.Random(turns)
    unused = []
    for seed in range(8):
        messages = history(seed, turns)
        originals = {m.get("tool_call_id") or id(m): m["content"] for m in messages}
        for _ in range(6):
            budget = rng.randint(500, 20_000)
            fitted = fit_messages(messages, budget)
            assert fitted.fits and fitted.tokens <= budget
            kept = fitted.messages
            calls = {c["id"] for m in kept for c in m.get("tool_calls") or ()}
            assert calls == {m["tool_call_id"] for m in kept if m["role"] == "tool"}
            for m in kept:
                if m["role"] == "tool" and m["content"] != originals[m["tool_call_id"]]:
                    before = COUNTER.count(originals[m["tool_call_id"]])
                    assert COUNTER.count(m["content"]) < before
                    assert "shortened to fit the budget" in m["content"]
            if len(kept) < len(messages) or fitted.shrunk:
                unused.append((budget - fitted.tokens) / budget)
    assert unused and statistics.mean(unused) <= 0.05, unused
    unused.sort()
    assert unused[int(0.9 * (len(unused) - 1))] <= 0.10, unused


def test_the_callers_count_decides_the_shortening() -> None:
    """With a count that is not our tokenizer, the result is still within the budget
    and little of it is left unused (the level is searched with the caller's count)."""
    from personae.api.context import _Adapter
    from personae.context.fit_items import fit_items

    rng = random.Random(5)
    calls = [{"id": f"c{k}", "type": "function",
              "function": {"name": "read_file", "arguments": "{}"}} for k in range(3)]  # fmt: skip
    messages = [
        {"role": "system", "content": "You are the builder."},
        {"role": "user", "content": "Read the logs."},
        {"role": "assistant", "content": "", "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{k}", "content": _text(rng, size)}
          for k, size in enumerate((30000, 8000, 400))),
        {"role": "assistant", "content": _text(rng, 400)},
    ]  # fmt: skip
    need = _chars_over_four(messages)
    for budget in (need // 2, need // 3, need // 5, need // 20):
        fitted = fit_items(messages, _Adapter(), _chars_over_four, budget)
        assert fitted.fits and fitted.tokens == _chars_over_four(fitted.items) <= budget
        assert (budget - fitted.tokens) / budget <= 0.05, (budget, fitted.tokens)
