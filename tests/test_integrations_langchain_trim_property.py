"""The ``trim_messages`` drop-in against LangChain's own, property-tested with hypothesis.

On random histories (parallel calls, results out of order, results whose call is
missing, calls never answered, messages given as dicts) and random options and
budgets, with a per-message and a list counter:

- personae's result never holds a tool result without its call before it, nor a call
  without its result when the input had that result;
- it is exactly LangChain's result whenever LangChain's keeps the same promises
  (and, with ``strategy="last"``, the latest human message).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.messages import trim_messages as lc_trim_messages

from personae.integrations.langchain import trim_messages

# A step: a human message, an assistant text, or an assistant's calls (1-3) whose
# results follow in order, reversed, one delayed past the next step, or one missing.
STEP = st.one_of(
    st.tuples(st.just("human"), st.integers(1, 40)),
    st.tuples(st.just("ai"), st.integers(1, 40)),
    st.tuples(
        st.just("calls"),
        st.integers(1, 3),
        st.integers(1, 60),
        st.sampled_from(["in order", "reversed", "delayed", "unanswered", "orphan"]),
    ),
)
OPTIONS = st.fixed_dictionaries(
    {
        "strategy": st.sampled_from(["first", "last"]),
        "allow_partial": st.booleans(),
        "end_on": st.sampled_from([None, "human", "ai", "tool", ("ai", "tool")]),
        "start_on": st.sampled_from([None, "human", "ai"]),
        "include_system": st.booleans(),
    }
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(steps: list[Any]) -> list[BaseMessage]:
    out: list[BaseMessage] = [SystemMessage("You are terse.")]
    delayed: list[BaseMessage] = []
    for n, step in enumerate(steps):
        if step[0] == "human":
            out.append(HumanMessage(f"q{n} " + "word " * step[1]))
        elif step[0] == "ai":
            out.append(AIMessage(f"a{n} " + "word " * step[1]))
        else:
            _, calls, size, order = step
            ids = [f"c{n}_{k}" for k in range(calls)]
            results: list[BaseMessage] = [ToolMessage("row " * size, tool_call_id=i) for i in ids]
            if order != "orphan":
                out.append(
                    AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": i} for i in ids])
                )
            if order == "reversed":
                results.reverse()
            elif order == "delayed":
                delayed.append(results.pop())
            elif order == "unanswered":
                results.pop()
            out.extend(results)
            continue
        out.extend(delayed)
        delayed = []
    return out + delayed


def words(message: BaseMessage) -> int:
    return len(str(message.content).split()) + 3


def per_message(message: BaseMessage) -> int:
    return words(message)


per_message.__annotations__["message"] = BaseMessage  # LangChain reads the annotation object


def as_list(messages: list[BaseMessage]) -> int:
    return sum(map(words, messages))


def broken(kept: list[BaseMessage], given: list[BaseMessage]) -> bool:
    """A result without its call before it, or a call whose given result is not kept."""
    answered = {m.tool_call_id for m in given if isinstance(m, ToolMessage)}
    called: set[str] = set()
    kept_results: set[str] = set()
    for m in kept:
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in called:
                return True
            kept_results.add(m.tool_call_id)
        elif isinstance(m, AIMessage):
            called.update(str(c["id"]) for c in m.tool_calls)
    return bool((called & answered) - kept_results)


def lost(kept: list[BaseMessage], given: list[BaseMessage], end_on: Any) -> bool:
    """The latest human message left once ``end_on`` dropped the trailing messages is
    not kept whole (what ``strategy="last"`` always keeps in personae's)."""
    types = (end_on,) if isinstance(end_on, str) else end_on
    end = len(given)
    while types and end and given[end - 1].type not in types:
        end -= 1
    latest = next((m for m in reversed(given[:end]) if isinstance(m, HumanMessage)), None)
    return latest is not None and not any(m.content == latest.content for m in kept)


@SETTINGS
@given(
    steps=st.lists(STEP, min_size=1, max_size=14),
    options=OPTIONS,
    share=st.floats(0.0, 1.2),
    list_counter=st.booleans(),
    as_dicts=st.booleans(),
)
def test_same_as_langchain_unless_langchain_breaks_the_history(
    steps: list[Any], options: dict[str, Any], share: float, list_counter: bool, as_dicts: bool
) -> None:
    msgs = build(steps)
    if options["strategy"] == "first":
        options = {**options, "start_on": None, "include_system": False}
    counter = as_list if list_counter else per_message
    budget = int(as_list(msgs) * share)
    given_msgs: list[Any] = msgs
    if as_dicts:  # the other input LangChain converts: OpenAI-style dicts
        given_msgs = convert_to_openai_messages(msgs)
    theirs = lc_trim_messages(given_msgs, max_tokens=budget, token_counter=counter, **options)
    ours = trim_messages(given_msgs, max_tokens=budget, token_counter=counter, **options)
    assert not broken(ours, msgs)
    lost_latest = options["strategy"] == "last" and lost(theirs, msgs, options["end_on"])
    if not broken(theirs, msgs) and not lost_latest:
        assert ours == theirs
