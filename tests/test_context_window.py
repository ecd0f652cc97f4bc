"""A session's ContextWindow prepares only what is new, with the from-scratch result."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personae.context import Budget, ChatMessage, ContextWindow, Snapshot, assemble_snapshot
from personae.context.history import MessageCosts
from personae.context.messages import ChatToolCall
from personae.context.profiles import load_profiles
from personae.context.render import render_sections
from personae.context.window import exchanges_of
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
TEXTS = [
    "ok",
    "The quick brown fox reviewed the report. " * 6,
    "日本語のテキストと中文内容混合在一起。" * 4,
    '{"id":"a1","items":[{"sku":"X-1","qty":3}]}\n' * 5,
    "</recent_messages> <task> # header\n\n[note]",
    "2026-11-22T10:00:01Z ERROR worker[42]: reset\n" * 40,
]
PROFILE = (
    "roles:\n  agent:\n    sections:\n      - task\n"
    "      - {tag: recent_messages, cap: 1000000, max_messages: 1000000}\n"
)

# One step of an agent loop: append a user turn, an assistant step with calls and
# their results (some missing or unmatched), a plain answer; or take messages back.
_step = st.one_of(
    st.tuples(st.just("user"), st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("calls"), st.integers(1, 3), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("answer"), st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("back"), st.integers(1, 4)),
    st.tuples(st.just("again")),  # nothing new: the window's previous snapshot is reused
)


def _apply(msgs: list[ChatMessage], step: tuple[object, ...], n: int) -> None:
    kind = step[0]
    if kind == "again":
        return
    if kind == "back":
        del msgs[max(0, len(msgs) - int(step[1])) :]  # type: ignore[call-overload]
        return
    seq = (msgs[-1].seq if msgs else 0) + 1
    if kind == "user":
        msgs.append(ChatMessage("user", f"turn {n}: {TEXTS[int(step[1])]}", seq=seq))  # type: ignore[call-overload]
    elif kind == "answer":
        msgs.append(ChatMessage("assistant", TEXTS[int(step[1])], seq=seq))  # type: ignore[call-overload]
    else:
        _, calls, answered, stray = step
        ids = [f"s{seq}c{k}" for k in range(int(calls))]  # type: ignore[call-overload]
        msgs.append(
            ChatMessage(
                "assistant", "reading", seq=seq,
                tool_calls=tuple(ChatToolCall(i, "read", '{"p": 1}') for i in ids),
            )
        )  # fmt: skip
        for k, i in enumerate(ids[: int(answered)]):  # type: ignore[call-overload]
            msgs.append(ChatMessage("tool", TEXTS[k % len(TEXTS)], tool_call_id=i, seq=seq + 1 + k))
        if stray:  # a result whose call is not in the window: never rendered
            msgs.append(ChatMessage("tool", "late", tool_call_id="gone", seq=msgs[-1].seq + 1))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("window")
    (base / ".personae").mkdir()
    (base / ".personae" / "profiles.yaml").write_text(PROFILE, encoding="utf-8")
    return base


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(_step, min_size=1, max_size=25),
    budgets=st.lists(st.integers(1500, 8000), min_size=25, max_size=25, unique=True),
    append=st.booleans(),
)
def test_window_turns_match_a_from_scratch_build(
    root: Path, steps: list[tuple[object, ...]], budgets: list[int], append: bool
) -> None:
    """Turn after turn (messages appended, some taken back), a snapshot built through
    the session's window has the id, messages, prepared exchanges and assembled prompt
    of one built from scratch."""
    window = ContextWindow()
    profiles = load_profiles(root)  # given: the snapshot of an unchanged turn is reused
    msgs: list[ChatMessage] = []
    costs_of = MessageCosts(COUNTER, frozenset({"task", "recent_messages"}))
    for n, (step, budget) in enumerate(zip(steps, budgets, strict=False)):
        before = list(msgs)
        _apply(msgs, step, n)
        grew = msgs[: len(before)] == before
        if append and grew:
            window.extend(msgs[len(before) :])  # the agent loop's way: only what is new
            kept = Snapshot.build(
                root, task="t", include_git_log=False, window=window, profiles=profiles
            )
        else:
            kept = Snapshot.build(
                root, messages=list(msgs), task="t", include_git_log=False, window=window,
                profiles=profiles,
            )  # fmt: skip
        fresh = Snapshot.build(root, messages=list(msgs), task="t", include_git_log=False)
        assert kept.id == fresh.id and kept.messages == fresh.messages
        got, want = window.exchanges(kept.messages, costs_of), exchanges_of(msgs, costs_of)
        assert got[1] == want[1]
        for f in dataclasses.fields(want[0]):
            mine, theirs = getattr(got[0], f.name), getattr(want[0], f.name)
            if not isinstance(theirs, int):
                mine, theirs = list(mine), list(theirs)
            assert mine == theirs, f.name
        # A budget this window never assembled for: no eviction hint, the same prompt.
        a = assemble_snapshot(kept, "agent", Budget.absolute(budget), COUNTER)
        b = assemble_snapshot(fresh, "agent", Budget.absolute(budget), COUNTER)
        assert a.render() == b.render() and a.total == b.total == COUNTER.count(b.render())
        assert a.total <= budget
        # Each section's text (joined on demand) is what the prompt holds inside its tags.
        shown = [(s.tag, s.text) for s in a.sections if s.text is not None]
        assert render_sections(shown) == a.render()


def test_window_extend_then_list_and_back(root: Path) -> None:
    """A window fed by ``extend`` and then given a shorter list holds exactly that list."""
    msgs = [ChatMessage("user", f"u{i}", seq=i + 1) for i in range(5)]
    window = ContextWindow()
    window.extend(msgs)
    assert window.messages == tuple(msgs) and len(window) == 5
    snap = Snapshot.build(root, messages=msgs[:3], task="t", include_git_log=False, window=window)
    assert window.messages == tuple(msgs[:3]) == snap.messages
    assert snap.id == Snapshot.build(root, messages=msgs[:3], task="t", include_git_log=False).id


def test_hints_past_the_limit_drop_the_least_recently_used() -> None:
    window = ContextWindow()
    window.remember_kept_from("busy", "snap", 7, 7)
    for n in range(1000):  # far more budgets than a session uses; "busy" stays in use
        window.remember_kept_from(("budget", n), "snap", n, n)
        assert window.kept_from("busy", "snap") == 7, n
        window.remember_kept_from("busy", "snap", 7, 7)
    assert window.kept_from(("budget", 0), "snap") is None  # the oldest unused went first
    kept = [n for n in range(1000) if window.kept_from(("budget", n), "snap") is not None]
    assert kept == list(range(1000 - len(kept), 1000))  # the most recently used ones
    assert len(kept) > 100
