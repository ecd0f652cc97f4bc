"""Hypothesis: whatever is appended, the store never holds an orphan tool result."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personae.store import Store
from personae.store.conversations import ConversationError, ConversationStore, Message, ToolCall
from personae.tokens import exact_counter

# An operation: a user or system message, an assistant message making k calls,
# a tool result for one of the ids c0..c9, or a batch of such operations.
_single = st.one_of(
    st.tuples(st.just("user"), st.just(0)),
    st.tuples(st.just("system"), st.just(0)),
    st.tuples(st.just("assistant"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("tool"), st.integers(min_value=0, max_value=9)),
)
_op = st.one_of(_single, st.lists(_single, min_size=1, max_size=4))


def _messages(op: object, counter: list[int]) -> list[Message]:
    singles = op if isinstance(op, list) else [op]
    out = []
    for role, k in singles:
        if role == "assistant":
            calls = []
            for _ in range(k):
                calls.append(ToolCall(f"c{counter[0] % 10}", "read_file", {"n": counter[0]}))
                counter[0] += 1
            ids = [c.id for c in calls]
            if len(ids) != len(set(ids)):
                calls = calls[:1]
            out.append(Message("assistant", "thinking", calls))
        elif role == "tool":
            out.append(Message("tool", "result", tool_call_id=f"c{k}"))
        else:
            out.append(Message(role, "hello"))
    return out


def _accepts(open_calls: set[str] | None, batch: list[Message]) -> tuple[bool, set[str] | None]:
    """Reference model: a tool result must answer an open call of the last assistant turn."""
    state = None if open_calls is None else set(open_calls)
    for message in batch:
        if message.role == "assistant":
            state = {c.id for c in message.tool_calls}
        elif message.role == "tool":
            if state is None or message.tool_call_id not in state:
                return False, open_calls
            state.discard(message.tool_call_id or "")
        else:
            state = None
    return True, state


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(_op, min_size=1, max_size=25))
def test_store_accepts_exactly_the_valid_tool_results(
    open_store: Callable[[], Store], ops: list[object]
) -> None:
    with open_store() as store:  # one database for all examples: each its own session
        conv = ConversationStore(store, exact_counter("o200k_base"))
        sid = conv.create_session()
        open_calls: set[str] | None = None
        counter = [0]
        expected_count = 0
        for op in ops:
            batch = _messages(op, counter)
            ok, after = _accepts(open_calls, batch)
            if ok:
                conv.append_many(sid, batch)
                open_calls = after
                expected_count += len(batch)
            else:
                with pytest.raises(ConversationError, match="does not answer"):
                    conv.append_many(sid, batch)
        history = conv.between(sid)
        assert len(history) == conv.count(sid) == expected_count
        assert [m.seq for m in history] == list(range(1, expected_count + 1))
        # No orphan: every tool result answers a call of the nearest assistant turn.
        current: set[str] | None = None
        for message in history:
            if message.role == "assistant":
                current = {c.id for c in message.tool_calls}
            elif message.role == "tool":
                assert current is not None and message.tool_call_id in current
                current.discard(message.tool_call_id or "")
            else:
                current = None
