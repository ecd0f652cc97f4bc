"""Later turns reuse what earlier turns read and prepared, with the same result."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personae.context import ContextWindow, Snapshot
from personae.store._conversation_model import ToolCall
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
BUDGET = 8000
WORDS = ["alpha", "beta", "gamma", "delta", "日本語", "{json:", "1}", "error", "retry"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.choice([3, 40, 400])))


def test_store_reads_reused_across_turns_match_a_fresh_read(tmp_path: Path) -> None:
    """Turn after turn (new messages appended, with tool calls), the messages read
    through the per-session reuse are the ones a fresh read returns."""
    rng = random.Random(7)
    (tmp_path / ".personae").mkdir()
    with Store(tmp_path / "state.db") as store:
        conv = ConversationStore(store, COUNTER)
        sid = conv.create_session()
        windows = {limit: ContextWindow() for limit in (None, 300, 5000)}
        for turn in range(40):
            conv.append(sid, Message("user", f"turn {turn} " + _text(rng)))
            for step in range(rng.randint(0, 2)):
                ids = [f"t{turn}s{step}c{k}" for k in range(rng.randint(1, 3))]
                calls = [ToolCall(i, "read", {"p": i}) for i in ids]
                conv.append(sid, Message("assistant", _text(rng), tool_calls=calls))
                for i in ids:
                    conv.append(sid, Message("tool", _text(rng), tool_call_id=i))
            conv.append(sid, Message("assistant", _text(rng)))
            for limit in (None, 300, 5000):

                def build(limit: int | None = limit, **kw: object) -> Snapshot:
                    return Snapshot.build(
                        tmp_path, conversations=conv, session=sid, counter=COUNTER,
                        task="t", include_git_log=False, max_tokens=limit, recent=8, **kw,
                    )  # fmt: skip

                reused = build(window=windows[limit])
                fresh = build()  # a fresh window: nothing reused
                assert reused.messages == fresh.messages, (turn, limit)
                assert reused.id == fresh.id
                assert reused.messages[-1].content == conv.recent(sid, 1)[-1].content


def _loop(root: Path, low_water: float) -> tuple[int, int, list[float]]:
    """An agent loop at an 8,000-token budget: (prompts, start moves, unused shares)."""
    from personae.context import Budget, ChatMessage, assemble_snapshot, load_profiles
    from personae.context.messages import ChatToolCall as Call

    (root / ".personae").mkdir(parents=True)
    (root / ".personae" / "profiles.yaml").write_text(
        "roles:\n  agent:\n    sections:\n      - task\n"
        "      - {tag: recent_messages, cap: 1000000, max_messages: 1000000,"
        f" low_water: {low_water}}}\n",
        encoding="utf-8",
    )
    profiles = load_profiles(root)
    window = ContextWindow()  # the session's, kept across the loop
    rng = random.Random(3)
    msgs: list[ChatMessage] = []
    prev: str | None = None
    prompts = moves = 0
    unused: list[float] = []
    for turn in range(60):
        msgs.append(ChatMessage("user", f"turn {turn} " + _text(rng), seq=len(msgs) + 1))
        for step in range(rng.randint(1, 2)):
            ids = [f"t{turn}s{step}c{k}" for k in range(rng.randint(1, 2))]
            calls = tuple(Call(i, "read", "{}") for i in ids)
            msgs.append(ChatMessage("assistant", _text(rng), tool_calls=calls, seq=len(msgs) + 1))
            msgs.extend(
                ChatMessage("tool", _text(rng), tool_call_id=i, seq=len(msgs) + 1 + k)
                for k, i in enumerate(ids)
            )
            snap = Snapshot.build(
                root, messages=list(msgs), task="t", include_git_log=False, profiles=profiles,
                window=window,
            )  # fmt: skip
            ctx = assemble_snapshot(snap, "agent", Budget.absolute(BUDGET), COUNTER)
            text = ctx.render()
            assert ctx.total == COUNTER.count(text) <= BUDGET
            assert ctx.messages[-1] == snap.messages[-1]  # the latest turn is whole
            kept_ids = {c.id for m in ctx.messages for c in m.tool_calls}
            assert all(m.tool_call_id in kept_ids for m in ctx.messages if m.role == "tool")
            assert any(m.content.startswith(f"turn {turn} ") for m in ctx.messages)
            if prev is not None:
                stable = prev.removesuffix("\n</recent_messages>")
                moves += not text.startswith(stable)
            if len(ctx.messages) < len(msgs):
                unused.append(1 - ctx.total / BUDGET)
            prev = text
            prompts += 1
        msgs.append(ChatMessage("assistant", _text(rng), seq=len(msgs) + 1))
    return prompts, moves, unused


def test_batch_eviction_keeps_the_prompt_prefix_between_evictions(tmp_path: Path) -> None:
    """With a low-water mark, most prompts extend the previous one byte for byte;
    evicting only what must go changes the prefix on almost every trimmed prompt."""
    prompts, moves, unused = _loop(tmp_path / "low", 0.8)
    _, sliding, sliding_unused = _loop(tmp_path / "sliding", 1.0)
    assert len(unused) > prompts // 2  # trimming was active for most of the loop
    assert sliding > len(sliding_unused) * 0.6
    assert moves <= sliding * 0.6, (moves, sliding)
    # The price: after an eviction the room above the low-water mark (20%) is unused
    # until new messages fill it again (plus what whole exchanges leave over).
    assert statistics.mean(unused) <= 0.2, statistics.mean(unused)
    assert statistics.mean(sliding_unused) <= statistics.mean(unused)


@settings(max_examples=60, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from([*WORDS, "\n", "\n\n", "  ", "🙂", "ﬁ"]),
        min_size=700,
    )
    | st.lists(st.sampled_from([*WORDS, "\n", "  ", "🙂"]), min_size=40, max_size=400),
    limit=st.integers(20, 3000),
    keep_head=st.booleans(),
)
def test_cuts_of_long_texts_from_token_offsets_are_exact(
    pieces: list[str], limit: int, keep_head: bool
) -> None:
    """A long (or middling: a tool output of a few hundred characters) text is cut at a
    point read from its (memoized) token offsets: the cut plus notice counts exactly
    what it says, within the limit, and keeps nearly all the room (the same text cut
    again for another limit reuses the offsets)."""
    from personae.context._textcut import cut_text

    text = " ".join(pieces)
    note = "[… cut]"
    for lim in (limit, limit // 2 + 10):
        cut = cut_text(text, lim, COUNTER, note, keep_head=keep_head)
        assert cut is not None
        assert cut.tokens == COUNTER.count(cut.text) <= lim
        kept = (
            cut.text.removesuffix("\n" + note) if keep_head else cut.text.removeprefix(note + "\n")
        )
        assert (text.startswith(kept) if keep_head else text.endswith(kept)) or kept == note
        whole = COUNTER.count(text)
        if whole + COUNTER.count(note) + 1 > lim:
            assert cut.tokens >= min(whole, lim) * 0.9 - 12, (cut.tokens, lim, whole)


def test_project_files_are_read_again_when_they_change(tmp_path: Path) -> None:
    """Unchanged project files are reused between turns; a rewrite (even of the same
    size within the same second) or a removal is seen by the next snapshot."""
    import os

    vision = tmp_path / ".personae" / "project" / "VISION.md"
    vision.parent.mkdir(parents=True)
    vision.write_text("# Vision\n\nShip the alpha.\n", encoding="utf-8")

    def seen() -> str | None:
        return Snapshot.build(tmp_path, include_git_log=False).content("vision")

    assert seen() == seen() == "# Vision\n\nShip the alpha."
    before = vision.stat()
    vision.write_text("# Vision\n\nShip the gamma.\n", encoding="utf-8")
    os.utime(vision, ns=(before.st_atime_ns, before.st_mtime_ns + 1))
    assert seen() == "# Vision\n\nShip the gamma."
    vision.unlink()
    assert seen() is None


_APPEND = """
import sys
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.tokens.exact import exact_counter
with Store(sys.argv[1]) as store:
    conv = ConversationStore(store, exact_counter("o200k_base"))
    conv.append(sys.argv[2], Message("user", sys.argv[3]))
"""


@pytest.mark.process
def test_store_turn_reuses_its_result_until_another_process_appends(tmp_path: Path) -> None:
    """Nothing appended: the previous turn's messages are the result (the same tuple).
    A message appended by another process is seen by the next turn, as a fresh read."""
    import subprocess
    import sys

    from personae.errors import UnknownNameError

    (tmp_path / ".personae").mkdir()
    db = tmp_path / "state.db"
    with Store(db) as store:
        conv = ConversationStore(store, COUNTER)
        sid = conv.create_session()
        with pytest.raises(UnknownNameError):
            conv.position("nope")
        assert conv.position(sid) == (0, 0)
        conv.append_many(sid, [Message("user", "hello"), Message("assistant", "hi")])
        window = ContextWindow()

        def build(**kw: object) -> Snapshot:
            return Snapshot.build(
                tmp_path, conversations=conv, session=sid, counter=COUNTER, task="t",
                include_git_log=False, max_tokens=5000, **kw,
            )  # fmt: skip

        first = build(window=window)
        again = build(window=window)
        assert again.messages is first.messages and again.id == first.id
        assert conv.position(sid) == (2, 2)
        subprocess.run([sys.executable, "-c", _APPEND, str(db), sid, "from elsewhere"], check=True)
        assert conv.position(sid) == (3, 3)
        later = build(window=window)
        assert [m.content for m in later.messages] == ["hello", "hi", "from elsewhere"]
        assert later.messages == build().messages and later.id == build().id != first.id
        assert later.messages[:2] == first.messages
