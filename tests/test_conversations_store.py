"""Conversation store on real SQLite files and a real PostgreSQL server (every test runs on
both backends): counted once, transactional, newest-first reads."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personae.errors import UnknownNameError
from personae.store import Store, StoreError
from personae.store.conversations import (
    ConversationError,
    ConversationStore,
    Message,
    ToolCall,
    token_text,
)
from personae.tokens import counter_for_model, exact_counter


class CallCounter:
    """A real TokenCounter (o200k_base underneath) that records how often it counts."""

    def __init__(self, name: str = "o200k_base") -> None:
        self._inner = exact_counter("o200k_base")
        self._name = name
        self.calls = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def exact(self) -> bool:
        return True

    def count(self, text: str) -> int:
        self.calls += 1
        return self._inner.count(text)


@pytest.fixture
def store(open_store: Callable[[], Store]) -> Iterator[Store]:
    with open_store() as opened:
        yield opened


def _exchange(n: int) -> list[Message]:
    return [
        Message("user", f"question {n}: please read the file"),
        Message(
            "assistant",
            "I will read it.",
            [
                ToolCall(f"call-{n}-a", "read_file", {"path": f"f{n}.py"}),
                {"id": f"call-{n}-b", "name": "grep", "args": {"pattern": "def"}},
            ],
        ),
        Message("tool", f"contents of f{n}.py\n" * 3, tool_call_id=f"call-{n}-a"),
        Message("tool", "12 matches", tool_call_id=f"call-{n}-b"),
        Message("assistant", f"answer {n}"),
    ]


def test_append_counts_once_and_reads_never_recount(store: Store) -> None:
    counter = CallCounter()
    conv = ConversationStore(store, counter)
    sid = conv.create_session(title="demo", persona="builder")
    seqs = conv.append_many(sid, _exchange(1))
    assert seqs == [1, 2, 3, 4, 5]
    assert conv.append(sid, Message("user", "thanks")) == 6
    assert counter.calls == 6
    for _ in range(5):
        conv.recent(sid, 6)
        list(conv.iter_backward(sid))
        conv.within_budget(sid, 10_000)
        conv.within_budget(sid, 10_000, counter=counter)  # same counter name: stored counts
    assert counter.calls == 6
    messages = conv.recent(sid, 10)
    assert [m.seq for m in messages] == [1, 2, 3, 4, 5, 6]
    expected = exact_counter("o200k_base")
    for message in messages:
        assert message.tokens == expected.count(token_text(message))
        assert message.counter == "o200k_base"
        assert message.created is not None
    session = conv.session(sid)
    assert session.title == "demo" and session.persona == "builder"
    assert session.message_count == conv.count(sid) == 6
    assert session.token_total == sum(m.tokens or 0 for m in messages)


def test_round_trip_of_tool_calls(store: Store) -> None:
    conv = ConversationStore(store, exact_counter("o200k_base"))
    sid = conv.create_session()
    conv.append_many(sid, _exchange(7))
    assistant = conv.recent(sid, 5)[1]
    assert assistant.role == "assistant"
    assert assistant.tool_calls == (
        ToolCall("call-7-a", "read_file", {"path": "f7.py"}),
        ToolCall("call-7-b", "grep", {"pattern": "def"}),
    )
    tool = conv.recent(sid, 5)[2]
    assert tool.tool_call_id == "call-7-a" and tool.tool_calls == ()
    assert '"name":"read_file"' in token_text(assistant)
    openai_style = Message(
        "assistant", "", [{"id": "x", "name": "grep", "arguments": '{"pattern": "def"}'}]
    )
    assert openai_style.tool_calls == (ToolCall("x", "grep", {"pattern": "def"}),)
    with pytest.raises(ConversationError, match="not JSON"):
        Message("assistant", "", [{"id": "x", "name": "grep", "arguments": "{oops"}])


def test_other_counter_recounts_lazily_once_per_message(open_store: Callable[[], Store]) -> None:
    with open_store() as store:
        conv = ConversationStore(store, exact_counter("o200k_base"))
        sid = conv.create_session()
        for n in range(4):
            conv.append_many(sid, _exchange(n))
        other = CallCounter("cl100k-probe")
        tail = conv.within_budget(sid, 10_000, counter=other)
        assert other.calls == len(tail) == 20
        assert {m.counter for m in tail} == {"cl100k-probe"}
        conv.within_budget(sid, 10_000, counter=other)
        list(conv.iter_backward(sid, counter=other))
        assert other.calls == 20
        stored = conv.recent(sid, 20)
        assert {m.counter for m in stored} == {"o200k_base"}  # originals untouched
    with open_store() as store:  # the per-counter cache is persistent
        conv = ConversationStore(store, exact_counter("o200k_base"))
        again = CallCounter("cl100k-probe")
        assert [m.tokens for m in conv.recent(sid, 20, counter=again)] == [m.tokens for m in tail]
        assert again.calls == 0


def test_estimated_counter_for_claude_is_stored_by_name(store: Store) -> None:
    conv = ConversationStore(store, counter_for_model("anthropic:claude-sonnet-4-5"))
    sid = conv.create_session()
    conv.append(sid, Message("user", "上下文窗口的大小决定了模型一次能够看到多少信息。"))
    (message,) = conv.recent(sid, 1)
    assert message.counter == "estimate:claude"
    assert message.tokens is not None and message.tokens >= 14


def test_failure_inside_transaction_leaves_nothing_half_written(store: Store) -> None:
    conv = ConversationStore(store, exact_counter("o200k_base"))
    sid = conv.create_session()
    conv.append(sid, Message("user", "before"))
    # Raise inside the append transaction, after earlier rows of the batch are written.
    with store.transaction() as conn:
        conn.execute(_EXPLODE[store.dialect])
        if store.dialect == "postgres":
            conn.execute(
                "CREATE TRIGGER boom AFTER INSERT ON messages FOR EACH ROW EXECUTE FUNCTION boom()"
            )
    batch = [Message("user", "one"), Message("assistant", "two"), Message("user", "explode")]
    with pytest.raises((sqlite3.DatabaseError, StoreError), match="injected failure"):
        conv.append_many(sid, batch)
    with pytest.raises((sqlite3.DatabaseError, StoreError), match="injected failure"):
        conv.append(sid, Message("user", "explode"))
    assert [m.content for m in conv.recent(sid, 10)] == ["before"]
    session = conv.session(sid)
    assert (session.message_count, session.last_seq) == (1, 1)
    assert conv.append(sid, Message("user", "after")) == 2  # store still usable
    if store.dialect == "sqlite":
        assert not store.conn.in_transaction


_EXPLODE = {
    "sqlite": "CREATE TRIGGER boom AFTER INSERT ON messages WHEN NEW.content = 'explode'"
    " BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
    "postgres": "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " IF NEW.content = 'explode' THEN RAISE EXCEPTION 'injected failure'; END IF;"
    " RETURN NEW; END $$",
}


def test_bad_input_fails_before_writing(store: Store) -> None:
    conv = ConversationStore(store, exact_counter("o200k_base"))
    sid = conv.create_session()
    unserializable = Message("assistant", "", [ToolCall("c1", "t", {"x": object()})])
    with pytest.raises(ConversationError, match="not JSON-serializable"):
        conv.append_many(sid, [Message("user", "fine"), unserializable])
    assert conv.count(sid) == 0
    with pytest.raises(ConversationError, match="role must be one of"):
        Message("robot", "hi")  # type: ignore[arg-type]
    with pytest.raises(ConversationError, match="needs a tool_call_id"):
        Message("tool", "out")
    with pytest.raises(ConversationError, match="only assistant messages"):
        Message("user", "x", [ToolCall("c", "t")])
    with pytest.raises(ConversationError, match="repeat"):
        Message("assistant", "", [ToolCall("c", "t"), ToolCall("c", "u")])
    with pytest.raises(ConversationError, match="only tool messages"):
        Message("user", "x", tool_call_id="c")
    with pytest.raises(ConversationError, match="missing id"):
        Message("assistant", "", [{"name": "t"}])


def test_tool_results_must_answer_an_open_call(store: Store) -> None:
    conv = ConversationStore(store, exact_counter("o200k_base"))
    sid = conv.create_session()
    with pytest.raises(ConversationError, match="does not answer an open tool call"):
        conv.append(sid, Message("tool", "orphan", tool_call_id="nope"))
    conv.append(sid, Message("user", "go"))
    conv.append(sid, Message("assistant", "", [ToolCall("a", "t"), ToolCall("b", "t")]))
    conv.append(sid, Message("tool", "ra", tool_call_id="a"))
    with pytest.raises(ConversationError, match="'a' does not answer"):
        conv.append(sid, Message("tool", "again", tool_call_id="a"))  # already answered
    with pytest.raises(ConversationError, match="'zzz' does not answer"):
        conv.append_many(
            sid, [Message("tool", "rb", tool_call_id="b"), Message("tool", "x", tool_call_id="zzz")]
        )
    assert conv.count(sid) == 3  # the failed batch wrote nothing
    conv.append(sid, Message("tool", "rb", tool_call_id="b"))
    conv.append(sid, Message("user", "next"))
    with pytest.raises(ConversationError, match="does not answer"):
        conv.append(sid, Message("tool", "late", tool_call_id="b"))


def test_sessions_and_errors(store: Store) -> None:
    conv = ConversationStore(store, exact_counter("o200k_base"))
    sid = conv.create_session(session_id="alpha", title="first")
    assert sid == "alpha"
    with pytest.raises(ConversationError, match="already exists"):
        conv.create_session(session_id="alpha")
    with pytest.raises(UnknownNameError, match="did you mean 'alpha'"):
        conv.append("alpah", Message("user", "hi"))
    with pytest.raises(UnknownNameError):
        conv.recent("missing", 3)
    with pytest.raises(UnknownNameError):
        conv.within_budget("missing", 100, before_seq=5)
    with pytest.raises(UnknownNameError):
        conv.between("missing")
    with pytest.raises(UnknownNameError):
        conv.latest_summary("missing")
    other = conv.create_session()
    assert len(other) == 32
    assert {s.id for s in conv.sessions()} == {"alpha", other}
    assert conv.recent("alpha", 5) == [] and conv.count("alpha") == 0
    assert conv.append_many("alpha", []) == []


def test_summaries(store: Store) -> None:
    conv = ConversationStore(store, exact_counter("o200k_base"))
    sid = conv.create_session()
    assert conv.latest_summary(sid) is None
    conv.append_many(sid, _exchange(1) + _exchange(2))
    first = conv.save_summary(sid, 5, "The user asked about f1.py.")
    second = conv.save_summary(sid, 8, "The user asked about f1.py and f2.py.")
    conv.save_summary(sid, 3, "older, shorter coverage saved late")
    latest = conv.latest_summary(sid)
    assert latest is not None and latest.text == second.text and latest.covers_seq == 8
    assert first.tokens == exact_counter("o200k_base").count(first.text)
    probe = CallCounter("probe")
    assert conv.latest_summary(sid, counter=probe) is not None
    conv.latest_summary(sid, counter=probe)
    assert probe.calls == 1
    with pytest.raises(ConversationError, match="covers seq 99"):
        conv.save_summary(sid, 99, "too far")
    assert [m.seq for m in conv.between(sid, after_seq=5, upto_seq=8)] == [6, 7, 8]
    assert [m.seq for m in conv.between(sid, after_seq=8)] == [9, 10]


def test_newest_first_reads_use_the_index(store: Store) -> None:
    """The plan walks the (session_id, seq) index: no table scan, no sort."""
    if store.dialect == "postgres":
        _postgres_reads_use_the_index(store)
        return
    plans = [
        store.conn.execute(
            "EXPLAIN QUERY PLAN SELECT id, seq, role, content, tool_calls, tool_call_id,"
            " tokens, counter, created FROM messages WHERE session_id = ?"
            + extra
            + " ORDER BY seq DESC LIMIT 32",
            params,
        ).fetchall()
        for extra, params in (("", ("s",)), (" AND seq < ?", ("s", 100)))
    ]
    for plan in plans:
        text = " ".join(str(row[-1]) for row in plan)
        assert text.startswith("SEARCH messages USING INDEX"), text
        assert "(session_id=?" in text and "TEMP B-TREE" not in text, text


def _postgres_reads_use_the_index(store: Store) -> None:
    # An empty table would be scanned whatever the indexes: rule sequential scans out, then
    # the plan must walk the unique (session_id, seq) index backward without a sort.
    with store.read() as conn:
        conn.execute("SET LOCAL enable_seqscan = off")
        for extra, params in (("", ("s",)), (" AND seq < ?", ("s", 100))):
            plan = " ".join(
                str(row[0])
                for row in conn.execute(
                    "EXPLAIN SELECT id, seq FROM messages WHERE session_id = ?"
                    + extra
                    + " ORDER BY seq DESC LIMIT 32",
                    params,
                ).fetchall()
            )
            assert "Index Scan Backward using messages_session_id_seq_key" in plan, plan
            assert "Sort" not in plan, plan


def test_reads_stop_early_on_long_histories(store: Store) -> None:
    if store.dialect == "postgres":  # the progress handler below counts SQLite VM steps
        _postgres_reads_stop_early(store)
        return
    conv = ConversationStore(store, exact_counter("o200k_base"))
    sid = conv.create_session()
    conv.append_many(sid, [Message("user", f"message number {i}") for i in range(3000)])
    steps = 0

    def progress() -> int:
        nonlocal steps
        steps += 1
        return 0

    store.conn.set_progress_handler(progress, 100)
    tail = conv.within_budget(sid, 50)
    small = steps
    steps = 0
    conv.between(sid)  # reads the whole history, for comparison
    whole = steps
    store.conn.set_progress_handler(None, 0)
    assert [m.content for m in tail][-1] == "message number 2999"
    assert sum(m.tokens or 0 for m in tail) <= 50
    assert small * 20 < whole, (small, whole)


def _postgres_reads_stop_early(shared: Store) -> None:
    # Rows the server read for the messages table (pg_stat_user_tables) stand in for SQLite
    # VM steps. One pooled connection, so its statistics are flushed when we ask.
    os.environ["PERSONAE_DATABASE_POOL_SIZE"] = "1"
    try:
        store = Store(shared.path, url=shared.url)
    finally:
        del os.environ["PERSONAE_DATABASE_POOL_SIZE"]
    with store:
        conv = ConversationStore(store, exact_counter("o200k_base"))
        sid = conv.create_session()
        conv.append_many(sid, [Message("user", f"message number {i}") for i in range(3000)])
        # What autovacuum does on a live server: without statistics the planner guesses a
        # handful of rows and reads the whole session with a sort (docs/postgres.md).
        with store.read() as conn:
            conn.execute("ANALYZE messages")

        def rows_read(read: Callable[[], object]) -> int:
            before = _rows_read(store)
            read()
            return _rows_read(store) - before

        small = rows_read(lambda: conv.within_budget(sid, 50))
        whole = rows_read(lambda: conv.between(sid))
        tail = conv.within_budget(sid, 50)
    assert [m.content for m in tail][-1] == "message number 2999"
    assert whole >= 3000 and small * 20 < whole, (small, whole)


def _rows_read(store: Store) -> int:
    with store.read() as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
    with store.read() as conn:
        conn.execute("SET LOCAL stats_fetch_consistency = none")
        row = conn.execute(
            "SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0)"
            " FROM pg_stat_user_tables WHERE relname = 'messages'"
        ).fetchone()
    return int(row[0])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=40), min_size=0, max_size=60),
    budget=st.integers(min_value=0, max_value=600),
    before=st.one_of(st.none(), st.integers(min_value=1, max_value=70)),
)
def test_within_budget_is_the_longest_fitting_tail(
    open_store: Callable[[], Store], sizes: list[int], budget: int, before: int | None
) -> None:
    with open_store() as store:  # one store for all examples: each example its own session
        conv = ConversationStore(store, exact_counter("o200k_base"))
        sid = conv.create_session()
        conv.append_many(sid, [Message("user", " hello" * size) for size in sizes])
        stored = conv.between(sid)
        got = conv.within_budget(sid, budget, before_seq=before)
        pool = [m for m in stored if before is None or (m.seq or 0) < before]
        expected: list[Message] = []
        used = 0
        for message in reversed(pool):
            if used + (message.tokens or 0) > budget:
                break
            used += message.tokens or 0
            expected.insert(0, message)
        assert [m.seq for m in got] == [m.seq for m in expected]
        assert conv.recent(sid, 7, before_seq=before) == pool[-7:]
