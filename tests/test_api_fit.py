"""``personae.fit_messages`` invariants on many generated conversations (public API only)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from personae import UsageError, fit_messages
from personae.context.messages import ChatMessage, ChatToolCall
from personae.tokens import exact_counter

WORDS = [
    "port",
    "config",
    "read",
    "file",
    "answer",
    "the",
    "a",
    "service",
    "listens",
    "setup",
    "steps",
    "readme",
]


def text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def conversation(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = [{"role": "system", "content": text(rng, 3, 20)}]
    for turn in range(rng.randint(1, 6)):
        out.append({"role": "user", "content": text(rng, 1, 40)})
        for step in range(rng.randint(0, 3)):
            calls = [
                {"id": f"c{turn}-{step}-{k}", "type": "function",
                 "function": {"name": "read_file", "arguments": '{"path": "x"}'}}
                for k in range(rng.randint(1, 2))
            ]  # fmt: skip
            out.append({"role": "assistant", "content": "", "tool_calls": calls})
            out += [
                {"role": "tool", "tool_call_id": c["id"], "content": text(rng, 1, 300)}
                for c in calls
            ]
        out.append({"role": "assistant", "content": text(rng, 1, 30)})
    if rng.random() < 0.5:  # sometimes the latest turn ends with the user
        out.append({"role": "user", "content": text(rng, 1, 10)})
    return out


def recount(messages: list[Any]) -> int:
    counter = exact_counter()
    total = 0
    for m in messages:
        total += 3 + counter.count(m["content"])
        for c in m.get("tool_calls") or ():
            fn = c["function"]
            total += counter.count(fn["name"]) + counter.count(fn["arguments"])
    return total


@pytest.mark.parametrize("seed", range(40))
def test_fit_invariants(seed: int) -> None:
    messages = conversation(seed)
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    for budget in (40, 150, 600, 5000):
        fitted = fit_messages(messages, budget)
        kept = fitted.messages
        # exact: the reported count is the count of what came back, within the budget
        assert fitted.tokens == recount(kept)
        if fitted.fits:
            assert fitted.tokens <= budget
        # order kept; unshortened messages are the originals
        originals = [m for m in kept if m in messages]
        assert originals == [m for m in messages if m in originals]
        # the system message and the latest user message are always there, unchanged
        assert kept[0] == messages[0]
        assert messages[last_user] in kept
        # pair-safe: every tool result has its call, every call all of its results
        calls = {c["id"] for m in kept for c in m.get("tool_calls") or ()}
        results = {m["tool_call_id"] for m in kept if m["role"] == "tool"}
        assert calls == results
        assert fitted.dropped == len(messages) - len(kept)
        if recount(messages) <= budget:
            assert kept == messages and fitted.dropped == 0


def test_chat_messages_come_back_as_chat_messages() -> None:
    messages = [
        ChatMessage("user", "old question " * 100),
        ChatMessage("assistant", "", tool_calls=(ChatToolCall("t1", "grep", '{"pattern": "x"}'),)),
        ChatMessage("tool", "match " * 500, tool_call_id="t1"),
        ChatMessage("assistant", "found it"),
        ChatMessage("user", "thanks, and now?"),
    ]
    fitted = fit_messages(messages, 30)
    assert all(isinstance(m, ChatMessage) for m in fitted.messages)
    # "found it" answered the evicted question: it goes with it (the history starts on a
    # user message), not left as a reply to nothing.
    assert [m.content for m in fitted.messages] == ["thanks, and now?"]
    assert fitted.fits and fitted.dropped == 4


def test_model_picks_the_tokenizer_and_a_bad_budget_is_refused() -> None:
    messages = [{"role": "user", "content": "word " * 50}]
    assert fit_messages(messages, 1000, model="anthropic:claude-haiku-4-5").tokens != (
        fit_messages(messages, 1000).tokens
    )
    with pytest.raises(UsageError, match="budget"):
        fit_messages(messages, 0)


@pytest.mark.process
def test_the_front_door_stays_light() -> None:
    """``import personae`` and the context functions load no model framework nor CLI."""
    import subprocess
    import sys

    code = (
        "import sys, personae\n"
        "personae.fit_messages, personae.assemble, personae.Cast, personae.create_handover\n"
        "print(sorted(m for m in ('pydantic_ai', 'typer', 'rich', 'openai', 'anthropic')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)  # fmt: skip
    assert out.stdout.strip() == "[]"
