"""personae[langchain] against the real langchain-core / langchain v1 (no mocks).

Each failure LangChain users report is reproduced with LangChain's own
``trim_messages`` on a given input, then personae's drop-in runs on the same input.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages import trim_messages as lc_trim_messages
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from personae.integrations.langchain import (
    FitContextMiddleware,
    count_tokens_exactly,
    trim_messages,
)


def problems(messages: list[BaseMessage]) -> list[str]:
    """What a chat API rejects: a tool result without its call, a call without its results."""
    out: list[str] = []
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in open_calls:
                out.append(f"orphan tool result at {i} ({m.tool_call_id})")
            open_calls.discard(m.tool_call_id)
            continue
        if open_calls and i > 0:
            out.append(f"unanswered calls before {i}: {sorted(open_calls)}")
            open_calls = set()
        if isinstance(m, AIMessage):
            open_calls = {str(c["id"]) for c in m.tool_calls}
    return out


def exchange(i: int, result: str) -> list[BaseMessage]:
    return [
        HumanMessage(f"question {i}"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": str(i)}, "id": f"call{i}"}]),
        ToolMessage(result, tool_call_id=f"call{i}"),
        AIMessage(f"answer {i}"),
    ]


# The input of langchain #33245 (token_counter=len counts messages).
ISSUE_33245: list[BaseMessage] = [
    HumanMessage("what is the weather?"),
    AIMessage("", tool_calls=[{"name": "weather", "args": {}, "id": "abc123"}]),
    ToolMessage("sunny", tool_call_id="abc123"),
    HumanMessage("thanks"),
    AIMessage("you are welcome"),
    HumanMessage("and tomorrow?"),
    AIMessage("rain"),
]


def test_orphaned_tool_result_langchain_vs_personae() -> None:
    theirs = lc_trim_messages(ISSUE_33245, strategy="last", token_counter=len, max_tokens=5)
    assert isinstance(theirs[0], ToolMessage)  # the reported failure, reproduced
    assert problems(theirs) == ["orphan tool result at 0 (abc123)"]
    ours = trim_messages(ISSUE_33245, strategy="last", token_counter=len, max_tokens=5)
    assert problems(ours) == []
    assert len(ours) <= 5
    assert ours[-2:] == ISSUE_33245[-2:]


def random_history(rng: random.Random) -> list[BaseMessage]:
    msgs: list[BaseMessage] = [SystemMessage("You are a careful assistant.")]
    for i in range(rng.randint(2, 8)):
        msgs.append(HumanMessage(f"question {i} " + "detail " * rng.randint(1, 30)))
        for k in range(rng.randint(0, 3)):
            calls = [
                {"name": "lookup", "args": {"q": f"{i}.{k}.{n}"}, "id": f"c{i}_{k}_{n}"}
                for n in range(rng.randint(1, 3))
            ]
            msgs.append(AIMessage("", tool_calls=calls))
            msgs += [
                ToolMessage("row " * rng.randint(1, 80), tool_call_id=str(c["id"])) for c in calls
            ]
        msgs.append(AIMessage(f"answer {i} " + "words " * rng.randint(1, 20)))
    msgs.append(HumanMessage("the latest question " + "context " * rng.randint(1, 40)))
    return msgs


def test_random_budgets_langchain_breaks_histories_personae_never() -> None:
    rng = random.Random(33245)
    broken = lost_latest = 0
    runs = 150
    for _ in range(runs):
        msgs = random_history(rng)
        full = count_tokens_exactly(msgs)
        budget = rng.randint(10, full)
        theirs = lc_trim_messages(msgs, max_tokens=budget, token_counter=count_tokens_exactly)
        broken += bool(problems(theirs))
        lost_latest += msgs[-1] not in theirs
        ours = trim_messages(
            msgs, max_tokens=budget, token_counter=count_tokens_exactly, include_system=True
        )
        assert problems(ours) == [], budget
        assert ours[-1] is msgs[-1]  # the latest human message, whole
        assert isinstance(ours[0], SystemMessage)
        fits_alone = count_tokens_exactly([msgs[0], msgs[-1]]) <= budget
        if fits_alone:
            assert count_tokens_exactly(ours) <= budget
    # LangChain's own function with its defaults fails on a good share of the same inputs.
    assert broken >= runs // 10, broken
    assert lost_latest >= 1


def test_start_on_human_loses_latest_turn_langchain_vs_personae() -> None:
    msgs: list[BaseMessage] = [SystemMessage("Be brief."), *exchange(1, "ok")]
    latest = HumanMessage("Here is my whole stack trace, what broke? " + "at frame x\n" * 60)
    msgs.append(latest)
    options: dict[str, Any] = {
        "max_tokens": 100,
        "token_counter": count_tokens_approximately,
        "strategy": "last",
        "start_on": "human",
        "include_system": True,
    }
    theirs = lc_trim_messages(msgs, **options)
    assert theirs == [msgs[0]]  # only the system message: the task itself is gone
    ours = trim_messages(msgs, **options)
    assert ours == [msgs[0], latest]


def cjk_build_history() -> list[BaseMessage]:
    msgs: list[BaseMessage] = [SystemMessage("You answer questions about the build logs.")]
    for i in range(8):
        record = {"id": f"0x{i:08x}a9f3c2e1", "sha": "e3b0c44298fc1c149afbf4c8996fb924"}
        msgs += [
            HumanMessage(f"第{i}回の質問：ビルドログを要約してください。エラーの原因は何ですか？"),
            AIMessage("", tool_calls=[{"name": "read_log", "args": {"i": i}, "id": f"c{i}"}]),
            ToolMessage(json.dumps(record), tool_call_id=f"c{i}"),
            AIMessage(
                f"ビルド{i}は依存関係の競合で失敗しました。ロックファイルを更新してください。"
            ),
        ]
    msgs.append(HumanMessage("最新の質問：今回の失敗を修正する手順を教えてください。"))
    return msgs


def test_approximate_counter_overruns_langchain_vs_personae() -> None:
    msgs = cjk_build_history()
    budget = 400
    theirs = lc_trim_messages(
        msgs, max_tokens=budget, token_counter="approximate", include_system=True
    )
    assert count_tokens_approximately(theirs) <= budget  # LangChain believes it fits ...
    assert count_tokens_exactly(theirs) > budget * 1.3  # ... it is over by a third or more
    ours = trim_messages(msgs, max_tokens=budget, token_counter="approximate", include_system=True)
    assert count_tokens_exactly(ours) <= budget
    assert problems(ours) == [] and ours[-1] is msgs[-1] and ours[0] is msgs[0]


def test_latest_turn_tool_output_is_shortened_with_notice_not_dropped() -> None:
    msgs: list[BaseMessage] = [
        SystemMessage("sys"),
        *exchange(1, "old"),
        HumanMessage("summarize the log"),
        AIMessage("", tool_calls=[{"name": "read", "args": {}, "id": "big"}]),
        ToolMessage("log line\n" * 2000, tool_call_id="big"),
    ]
    ours = trim_messages(msgs, max_tokens=300, token_counter="approximate", include_system=True)
    assert count_tokens_exactly(ours) <= 300
    assert [type(m).__name__ for m in ours] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
    ]
    assert "[output shortened to fit the budget" in str(ours[-1].content)
    assert str(msgs[-1].content).startswith(str(ours[-1].content).split("\n[output")[0])


SEEN: list[list[BaseMessage]] = []


class RecordingFakeModel(GenericFakeChatModel):
    """LangChain's own offline fake chat model, recording what each call receives."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        SEEN.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def test_create_agent_middleware_fits_every_model_call() -> None:
    SEEN.clear()
    history: list[BaseMessage] = []
    for i in range(6):
        history += exchange(i, "table row " * 150)
    history.append(HumanMessage("what changed since yesterday?"))
    model = RecordingFakeModel(
        messages=iter(
            [
                AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "diff"}, "id": "n1"}]),
                AIMessage("two files changed"),
            ]
        )
    )
    middleware = FitContextMiddleware(600)
    agent = create_agent(
        model, tools=[lookup], system_prompt="You are terse.", middleware=[middleware]
    )
    result = agent.invoke({"messages": history})
    assert result["messages"][-1].content == "two files changed"
    assert len(SEEN) == 2  # the tool call, then the answer: each call fitted
    for seen in SEEN:
        assert isinstance(seen[0], SystemMessage)
        assert problems(seen) == []
        assert count_tokens_exactly(seen) <= 600
        assert any(m.content == history[-1].content for m in seen if isinstance(m, HumanMessage))
    assert count_tokens_exactly([SystemMessage("You are terse."), *history]) > 600
    # The agent's own state keeps the whole history: only the model input is fitted.
    assert len(result["messages"]) == len(history) + 3


def test_every_strategy_and_option_keeps_exchanges_whole() -> None:
    """strategy="first" and "last", allow_partial, end_on and start_on on random tool
    histories: LangChain's own function breaks some; personae's drop-in never does, and
    "last" always keeps the latest human message."""
    rng = random.Random(28)
    broken_theirs = 0
    for _ in range(120):
        msgs = random_history(rng)
        budget = rng.randint(10, count_tokens_exactly(msgs))
        options: dict[str, Any] = {
            "max_tokens": budget,
            "token_counter": count_tokens_exactly,
            "strategy": rng.choice(["first", "last"]),
            "allow_partial": rng.random() < 0.5,
            "end_on": rng.choice([None, "human", "ai", "tool", ("ai", "tool")]),
        }
        if options["strategy"] == "last":
            options["start_on"] = rng.choice([None, "human", "ai"])
            options["include_system"] = rng.random() < 0.5
        theirs = lc_trim_messages(msgs, **options)
        broken_theirs += bool(problems(theirs))
        ours = trim_messages(msgs, **options)
        assert problems(ours) == [], options
        if options["strategy"] == "last" and options["end_on"] in (None, "human"):
            assert any(m is msgs[-1] for m in ours), options
    assert broken_theirs > 10


def test_runnable_form_in_a_chain() -> None:
    trimmer = trim_messages(max_tokens=5, token_counter=len, strategy="last")
    chain = trimmer | (lambda kept: [m.type for m in kept])
    assert chain.invoke(ISSUE_33245) == ["human", "ai", "human", "ai"]
    with pytest.raises(ValueError, match="start_on parameter is only valid with strategy='last'"):
        trim_messages(
            ISSUE_33245, max_tokens=5, token_counter=len, strategy="first", start_on="human"
        )
