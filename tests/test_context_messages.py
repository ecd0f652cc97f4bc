"""Messages given as dicts, mappings or objects become the same chat messages."""

from __future__ import annotations

from dataclasses import fields
from types import MappingProxyType, SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from personae.context.messages import ChatMessage, ChatToolCall, from_stored

VALUES = st.one_of(st.none(), st.text(max_size=5), st.integers(-3, 3), st.just({"k": [1, "x"]}))
SEQS = st.one_of(st.none(), st.integers(-3, 3), st.just("5"), st.just(""))
CALLS = st.lists(
    st.one_of(
        st.dictionaries(st.sampled_from(["id", "name", "arguments", "args", "input"]), VALUES),
        st.builds(
            lambda i, a: {"id": i, "function": {"name": "f", "arguments": a}},
            VALUES, st.one_of(st.none(), st.just('{"a":1}'), st.just({"b": [2]})),
        ),
        st.just(ChatToolCall("c1", "read", "{}")),
    ),
    max_size=3,
)  # fmt: skip
MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["user", "assistant", "tool", "system", "bogus"]),
        "content": VALUES, "seq": SEQS, "id": SEQS, "counter": VALUES,
        "tokens": st.one_of(st.none(), st.integers(0, 9), st.just("7")),
        "tool_calls": st.one_of(st.none(), CALLS),
    },
)  # fmt: skip


def test_the_fields_are_in_the_order_the_converters_pass_them() -> None:
    """The converters build messages and calls positionally (cheaper than keywords)."""
    assert [f.name for f in fields(ChatMessage)] == [
        "role", "content", "tool_calls", "tool_call_id", "tokens", "seq", "counter",
    ]  # fmt: skip
    assert [f.name for f in fields(ChatToolCall)] == ["id", "name", "arguments"]


@settings(max_examples=400, deadline=None)
@given(message=MESSAGES, counter=st.sampled_from([None, "o200k_base"]))
def test_a_dict_converts_as_any_mapping_or_object_with_its_fields(
    message: dict[str, Any], counter: str | None
) -> None:
    """A plain dict (the fast path) gives the message a read-only mapping and an object
    with the same fields give."""
    got = from_stored(message, counter=counter)
    assert got == from_stored(MappingProxyType(message), counter=counter)
    assert got == from_stored(SimpleNamespace(**message), counter=counter)


def test_a_dict_converts_with_its_defaults_and_canonical_arguments() -> None:
    got = from_stored(
        {"role": "bogus", "content": None, "id": 4, "tokens": "7",
         "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"b": 1, "a": [2]}}},
                        {"name": "g", "input": "raw"}]},
        counter="c",
    )  # fmt: skip
    assert got == ChatMessage(
        "system", "", (ChatToolCall("a", "f", '{"a":[2],"b":1}'), ChatToolCall("", "g", "raw")),
        None, 7, 4, "c",
    )  # fmt: skip
    assert from_stored({}) == ChatMessage("user", "")
