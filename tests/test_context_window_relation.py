"""How a window's prompts relate to a from-scratch build at the same budget, turn after
turn: byte-identical except where the conversation starts. The window keeps the
previous prompt's first exchange while the exchanges from there fit; a build from
scratch starts at a point of its cut grid (the exchange the point falls in shown
shortened); the cut warning follows what each cut. Between evictions the window's
previous prompt is its prefix; an eviction goes down to ``low_water`` of the room,
where a from-scratch build leaves about one grid step unused."""

from __future__ import annotations

import random
from pathlib import Path

from _helpers import HISTORY_TEXTS
from personae.context import (
    AssembledContext,
    Budget,
    ChatMessage,
    ContextWindow,
    Snapshot,
    assemble_snapshot,
)
from personae.context.fit import FittedSection
from personae.context.messages import ChatToolCall
from personae.context.profiles import load_profiles
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
TEXTS = HISTORY_TEXTS[:4]


def _section(ctx: AssembledContext, tag: str) -> FittedSection:
    return next(s for s in ctx.sections if s.tag == tag)


def test_window_prompts_differ_from_scratch_only_where_the_conversation_starts(
    tmp_path: Path,
) -> None:
    (tmp_path / ".personae").mkdir()
    (tmp_path / ".personae" / "profiles.yaml").write_text(
        "roles:\n  agent:\n    sections:\n      - task\n"
        "      - {tag: recent_messages, cap: 1000000, max_messages: 1000000}\n",
        encoding="utf-8",
    )
    profiles = load_profiles(tmp_path)
    rng = random.Random(29)
    window = ContextWindow()
    msgs: list[ChatMessage] = []
    budget = Budget.absolute(20_000)
    same = differ = evictions = 0
    previous_first: int | None = None
    previous = ""
    for turn in range(120):
        seq = len(msgs) + 1
        msgs.append(ChatMessage("user", f"turn {turn}: " + rng.choice(TEXTS), seq=seq))
        ids = [f"t{turn}c{k}" for k in range(rng.randint(1, 2))]
        calls = tuple(ChatToolCall(i, "read", "{}") for i in ids)
        msgs.append(ChatMessage("assistant", "reading", tool_calls=calls, seq=seq + 1))
        for k, i in enumerate(ids):
            content = rng.choice(TEXTS) * rng.randint(1, 3)
            msgs.append(ChatMessage("tool", content, tool_call_id=i, seq=seq + 2 + k))
        msgs.append(ChatMessage("assistant", rng.choice(TEXTS), seq=len(msgs) + 1))
        kept = Snapshot.build(tmp_path, messages=list(msgs), task="t", include_git_log=False,
                              window=window, profiles=profiles)  # fmt: skip
        fresh = Snapshot.build(tmp_path, messages=list(msgs), task="t", include_git_log=False)
        a = assemble_snapshot(kept, "agent", budget, COUNTER)
        b = assemble_snapshot(fresh, "agent", budget, COUNTER)
        assert a.total <= 20_000 and b.total <= 20_000
        if turn == 0:
            assert a.render() == b.render()  # no cut point held yet
        # Every other section is the same (the cut warning, when either has one, names
        # what was cut there).
        mine = {s.tag: s.text for s in a.sections if s.tag != "context_warning"}
        theirs = {s.tag: s.text for s in b.sections if s.tag != "context_warning"}
        assert mine.keys() == theirs.keys()
        assert all(mine[t] == theirs[t] for t in mine if t != "recent_messages")
        # Both keep the latest turn; the window keeps its cut point while it fits.
        latest = max(x.seq for x in msgs if x.role == "user")
        assert latest in {m.seq for m in a.messages} and latest in {m.seq for m in b.messages}
        first = a.messages[0].seq
        if previous_first is not None and first != previous_first:
            evictions += 1
            assert first > previous_first  # an eviction moves it forward only
            # down to the low-water mark (0.8 of the room), where a from-scratch build
            # fills its room up to about one step of its grid (8%; shortening an
            # output may leave a little more)
            conv = _section(a, "recent_messages")
            assert conv.kept <= 0.8 * conv.allotted, (conv.kept, conv.allotted)
            assert a.total < 0.9 * 20_000 <= b.total, (a.total, b.total)
        elif previous_first is not None:
            # the cut point held: the previous prompt is this one's prefix up to its
            # last message (provider caches keep hitting)
            assert a.render().startswith(previous.rsplit("</recent_messages>", 1)[0])
        previous_first, previous = first, a.render()
        if a.render() == b.render():
            same += 1
        else:
            differ += 1
    assert differ > 10 and same > 0  # the relation is exercised both ways
    assert 0 < evictions < 40, evictions  # the window holds its cut point over several turns
