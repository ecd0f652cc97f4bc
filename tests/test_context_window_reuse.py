"""Later turns reuse what earlier turns read and prepared, with the same result."""

from __future__ import annotations

import random
from pathlib import Path

from personae.context import Snapshot, _conversation
from personae.store._conversation_model import ToolCall
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
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

                def build(limit: int | None = limit) -> Snapshot:
                    return Snapshot.build(
                        tmp_path, conversations=conv, session=sid, counter=COUNTER,
                        task="t", include_git_log=False, max_tokens=limit, recent=8,
                    )  # fmt: skip

                reused = build()
                _conversation._TAILS.clear()
                fresh = build()
                assert reused.messages == fresh.messages, (turn, limit)
                assert reused.id == fresh.id
                assert reused.messages[-1].content == conv.recent(sid, 1)[-1].content
