"""Every integration's fitted history starts on a user turn after its system part:
an assistant reply (or a tool step) whose question was evicted goes with it.

Property-tested with hypothesis on random tool histories and budgets, against the
real frameworks' message types: LangChain (FitContextMiddleware's fit), pydantic-ai
(FitHistory) and the OpenAI Agents SDK (PersonaeSession.get_items on SQLite).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from personae.integrations.langchain import count_tokens_exactly, fit_langchain
from personae.integrations.pydantic_ai import FitHistory, count_model_messages
from personae.store import Store
from personae.store.conversations import ConversationStore
from personae.tokens import exact_counter

# A turn: the user's words, then steps: ("text", size) or ("calls", n results, size).
STEP = st.one_of(
    st.tuples(st.just("text"), st.integers(1, 80)),
    st.tuples(st.just("calls"), st.integers(1, 3), st.integers(1, 200)),
)
TURN = st.tuples(st.integers(1, 60), st.lists(STEP, min_size=1, max_size=3))
HISTORY = st.lists(TURN, min_size=1, max_size=6)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def langchain_history(turns: list[Any]) -> list[BaseMessage]:
    out: list[BaseMessage] = [SystemMessage("You are terse.")]
    for t, (asked, steps) in enumerate(turns):
        out.append(HumanMessage(words(asked, f"q{t}")))
        for s, step in enumerate(steps):
            if step[0] == "text":
                out.append(AIMessage(words(step[1], "a")))
                continue
            ids = [f"c{t}_{s}_{k}" for k in range(step[1])]
            out.append(AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": i} for i in ids]))
            out += [ToolMessage(words(step[2], "r"), tool_call_id=i) for i in ids]
    return out


@SETTINGS
@given(HISTORY, st.integers(20, 3000))
def test_langchain_fit_starts_on_a_human_message(turns: list[Any], budget: int) -> None:
    msgs = langchain_history(turns)
    kept = fit_langchain(msgs, budget, token_counter=count_tokens_exactly).items
    assert isinstance(kept[0], SystemMessage)
    assert isinstance(kept[1], HumanMessage), [m.type for m in kept]
    latest = [m for m in msgs if isinstance(m, HumanMessage)][-1]
    assert any(m is latest for m in kept)


def pydantic_history(turns: list[Any]) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for t, (asked, steps) in enumerate(turns):
        parts: list[Any] = [UserPromptPart(words(asked, f"q{t}"))]
        if t == 0:
            parts.insert(0, SystemPromptPart("You are terse."))
        out.append(ModelRequest(parts=parts))
        for s, step in enumerate(steps):
            if step[0] == "text":
                out.append(ModelResponse(parts=[TextPart(words(step[1], "a"))]))
                continue
            ids = [f"c{t}_{s}_{k}" for k in range(step[1])]
            out.append(ModelResponse(parts=[ToolCallPart("f", {}, tool_call_id=i) for i in ids]))
            out.append(
                ModelRequest(parts=[ToolReturnPart("f", words(step[2], "r"), tool_call_id=i)
                                    for i in ids])
            )  # fmt: skip
    return out


@SETTINGS
@given(HISTORY, st.integers(20, 3000))
def test_pydantic_ai_fit_starts_on_a_user_prompt(turns: list[Any], budget: int) -> None:
    history = pydantic_history(turns)
    fit = FitHistory(budget, model="gpt-4o")
    kept = fit(history)
    flat = [
        (type(m).__name__, type(p).__name__)
        for m in kept
        for p in m.parts
        if not isinstance(p, SystemPromptPart)
    ]
    assert flat and flat[0] == ("ModelRequest", "UserPromptPart"), flat
    assert fit.last is not None
    assert not fit.last.fits or count_model_messages(kept, model="gpt-4o") <= budget


def openai_items(turns: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t, (asked, steps) in enumerate(turns):
        out.append({"role": "user", "content": words(asked, f"q{t}")})
        for s, step in enumerate(steps):
            if step[0] == "text":
                out.append({"role": "assistant", "content": words(step[1], "a")})
                continue
            ids = [f"c{t}_{s}_{k}" for k in range(step[1])]
            out += [
                {"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"} for i in ids
            ]
            out += [
                {"type": "function_call_output", "call_id": i, "output": words(step[2], "r")}
                for i in ids
            ]
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(HISTORY, st.integers(20, 3000))
def test_openai_agents_session_starts_on_a_user_item(turns: list[Any], budget: int) -> None:
    # imported here: the Agents SDK costs each pytest-xdist worker ~2.5 s CPU at collection
    from personae.integrations.openai_agents import PersonaeSession

    with tempfile.TemporaryDirectory() as tmp:
        conversations = ConversationStore(Store(Path(tmp) / "personae.db"), exact_counter())
        session = PersonaeSession("chat", conversations, budget=budget)
        asyncio.run(session.add_items(openai_items(turns)))
        items = asyncio.run(session.get_items())
    assert items, "the latest user turn is always kept"
    assert items[0].get("role") == "user", items[:2]
